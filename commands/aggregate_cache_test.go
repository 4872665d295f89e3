package commands

import (
	"fmt"
	"testing"
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
