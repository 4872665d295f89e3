package httpapi

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestLimiterForgetsIdleKeysAndStaysBounded(t *testing.T) {
	now := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	l := newLimiter(10, 20, 100)
	for i := 0; i < 50; i++ {
		l.take(fmt.Sprint("k", i), 1, now)
	}
	if len(l.buckets) != 50 {
		t.Fatalf("%d buckets, want 50", len(l.buckets))
	}
	// A minute later every bucket has refilled: the sweep drops them all, losing nothing.
	d := l.take("fresh", 5, now.Add(limiterSweepEvery))
	if len(l.buckets) != 1 || !d.allowed || d.remaining != 15 {
		t.Fatalf("after the sweep: %d buckets, decision %+v", len(l.buckets), d)
	}
	// However many keys arrive at once, the map never exceeds its bound.
	for i := 0; i < 1000; i++ {
		l.take(fmt.Sprint("burst", i), 1, now.Add(limiterSweepEvery+time.Second))
		if len(l.buckets) > 100 {
			t.Fatalf("%d buckets, bound 100", len(l.buckets))
		}
	}
}

func TestLimiterCostAboveBurstNeedsAFullBucket(t *testing.T) {
	now := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	l := newLimiter(1, 1, 10)
	if d := l.take("k", 2, now); !d.allowed || d.remaining != 0 || d.reset != 1 {
		t.Fatalf("first: %+v", d)
	}
	if d := l.take("k", 2, now.Add(500*time.Millisecond)); d.allowed || d.retryAfter != 1 {
		t.Fatalf("half a token: %+v", d)
	}
	// A clock that steps back neither refills nor breaks the bucket.
	if d := l.take("k", 1, now.Add(-time.Hour)); d.allowed {
		t.Fatalf("clock went back: %+v", d)
	}
}

func TestKeyCacheIsBounded(t *testing.T) {
	now := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	c := &keyCache{ttl: 5 * time.Second, max: 10, entries: map[string]cachedKey{}}
	for i := 0; i < 100; i++ {
		c.put(fmt.Sprint(i), cachedKey{found: true, fetched: now})
		if len(c.entries) > 10 {
			t.Fatalf("%d entries, bound 10", len(c.entries))
		}
	}
	c.put("x", cachedKey{found: true, fetched: now})
	if _, ok := c.get("x", now.Add(4*time.Second)); !ok {
		t.Fatal("entry gone within its TTL")
	}
	if _, ok := c.get("x", now.Add(5*time.Second)); ok {
		t.Fatal("entry served at its TTL")
	}
	c.put("y", cachedKey{found: true, fetched: now})
	if _, ok := c.get("y", now.Add(-time.Second)); ok {
		t.Fatal("entry served on a clock that went back")
	}
}

func TestMemoryReplayGuardSweeps(t *testing.T) {
	now := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	clock := now
	g := newMemoryReplayGuard(func() time.Time { return clock })
	ctx := context.Background()
	for i := 0; i < memoryGuardMinSweep-1; i++ {
		g.Seen(ctx, []byte(fmt.Sprint(i)), now.Add(time.Minute))
	}
	clock = now.Add(2 * time.Minute)
	g.Seen(ctx, []byte("last"), clock.Add(time.Minute))
	if len(g.seen) != 1 {
		t.Fatalf("%d signatures kept after the sweep, want 1", len(g.seen))
	}
}
