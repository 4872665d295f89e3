package commands

import (
	"fmt"
	"testing"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// An entry in use survives any number of others passing through, and the cache never holds
// more than its bound.
func TestStateCacheKeepsWhatIsInUse(t *testing.T) {
	c := newStateCache(100)
	c.put("billing-busy", 1)
	for i := range 10_000 {
		c.put(fmt.Sprint("execution-", i), i)
		if i%40 == 0 { // the busy account is used every 40 executions: well within a generation
			if _, ok := c.get("billing-busy"); !ok {
				t.Fatalf("the account in use was evicted after %d others", i)
			}
		}
		if n := len(c.young) + len(c.old); n > 100 {
			t.Fatalf("%d entries, bound 100", n)
		}
	}
	if _, ok := c.get("execution-0"); ok {
		t.Fatal("the entry unused longest is still there")
	}
	if v, ok := c.get("execution-9999"); !ok || v != 9999 {
		t.Fatalf("the newest entry: %v %v", v, ok)
	}
	c.drop("execution-9999")
	if _, ok := c.get("execution-9999"); ok {
		t.Fatal("a dropped entry is still there")
	}
}

// A state of an earlier revision never replaces a later one: a read that overlapped an append
// of this process ends after the append cached its result.
func TestStateCacheKeepsTheLaterRevision(t *testing.T) {
	c := newStateCache(100)
	c.put("billing-w", loaded[int]{state: 17, revision: 17, exists: true})
	c.put("billing-w", loaded[int]{state: 10, revision: 10, exists: true})
	if v, _ := c.get("billing-w"); v.(loaded[int]).revision != 17 {
		t.Fatalf("cached revision %d after a stale put, want 17", v.(loaded[int]).revision)
	}
	c.put("billing-w", loaded[int]{})
	if v, _ := c.get("billing-w"); v.(loaded[int]).revision != 17 {
		t.Fatalf("cached revision %d after a put of no stream, want 17", v.(loaded[int]).revision)
	}
	c.put("billing-w", loaded[int]{state: 18, revision: 18, exists: true})
	if v, _ := c.get("billing-w"); v.(loaded[int]).revision != 18 {
		t.Fatalf("cached revision %d after a later put, want 18", v.(loaded[int]).revision)
	}
	// The same holds when the later state has aged into the old generation.
	for i := range 60 {
		c.put(fmt.Sprint("execution-", i), i)
	}
	c.put("billing-w", loaded[int]{state: 12, revision: 12, exists: true})
	if v, _ := c.get("billing-w"); v.(loaded[int]).revision != 18 {
		t.Fatalf("cached revision %d after a stale put over the old generation, want 18", v.(loaded[int]).revision)
	}
}

// A category with a cache of its own keeps its states however many others pass through the
// shared one: cache windows stay known while more distinct calls are in flight than the
// shared cache holds.
func TestStateCachesKeepAWindowPastTheSharedBound(t *testing.T) {
	c := newStateCaches(100, map[string]int{"window": 1000})
	c.put("window-a", 1)
	for i := range 10_000 {
		c.put(fmt.Sprint("execution-", i), i)
	}
	if v, ok := c.get("window-a"); !ok || v != 1 {
		t.Fatalf("the window after 10,000 executions: %v %v", v, ok)
	}
	if _, ok := c.get("execution-0"); ok {
		t.Fatal("the shared cache kept more than its bound")
	}
	if v, ok := c.take("window-a"); !ok || v != 1 {
		t.Fatalf("take: %v %v", v, ok)
	}
	c.put("window-b", 2)
	c.drop("window-b")
	if _, ok := c.get("window-b"); ok {
		t.Fatal("a dropped window is still there")
	}
}

// A process keeps cache windows apart from the states of its executions.
func TestAProcessKeepsWindowsInTheirOwnCache(t *testing.T) {
	c := New(nil).Executions.cache
	window := eventstore.StreamName(execution.CacheCategory, "key")
	if c.of(window) == c.shared || c.of(ExecutionStream("e")) != c.shared {
		t.Fatal("cache windows share the executions' cache")
	}
}
