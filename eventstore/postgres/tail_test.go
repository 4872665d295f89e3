package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/eventstore"
)

// TestTailIsShared: live subscriptions of one Store do not each read the log; the tail reads
// it once per wake-up and hands every subscription its events.
func TestTailIsShared(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{PollInterval: time.Hour})
	ctx := testCtx(t)
	const n = 12
	subs := make([]eventstore.Subscription, n)
	for i := range subs {
		filter := eventstore.Filter{}
		if i%2 == 1 {
			filter.Categories = []string{"shared"}
		}
		sub, err := st.Subscribe(ctx, eventstore.Start, filter)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs[i] = sub
	}
	pollUntil(t, "every subscription joined the tail", func() bool { return st.tail.memberCount() == n })
	before := st.subscriptionReads.Load()
	for i := range 3 {
		ev := event("Shared")
		if _, err := st.Append(ctx, fmt.Sprintf("shared-%d", i), eventstore.NoStream(), ev); err != nil {
			t.Fatal(err)
		}
		for j, sub := range subs {
			if got := receive(t, sub, 1)[0]; got.ID != ev.ID {
				t.Fatalf("subscription %d got %s, want %s", j, got.ID, ev.ID)
			}
		}
	}
	// One read per append (two if a wake-up lands mid-read), not one per subscription.
	reads := st.subscriptionReads.Load() - before
	if reads > 6 {
		t.Errorf("%d log reads for 3 appends and %d subscriptions: the subscriptions read on their own", reads, n)
	}
	t.Logf("%d log reads for 3 appends and %d subscriptions", reads, n)
}

// TestTailEvictsSlowSubscriber: a subscription that stops taking events does not hold the
// others back; it is evicted, reads on its own, and still gets every event in order.
func TestTailEvictsSlowSubscriber(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{PollInterval: time.Hour, BatchSize: 5})
	ctx := testCtx(t)
	slow, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	pollUntil(t, "both subscriptions joined the tail", func() bool { return st.tail.memberCount() == 2 })
	const total = 200 // far beyond the slow one's channel and its allowance in the tail
	var want []eventstore.EventData
	for i := range total {
		ev := event("Flood")
		want = append(want, ev)
		if _, err := st.Append(ctx, fmt.Sprintf("flood-%d", i%7), eventstore.Any(), ev); err != nil {
			t.Fatal(err)
		}
	}
	got := receive(t, fast, total)
	pollUntil(t, "the slow subscription was evicted", func() bool { return st.tail.memberCount() == 1 })
	gotSlow := receive(t, slow, total)
	for i := range want {
		if got[i].ID != want[i].ID || gotSlow[i].ID != want[i].ID {
			t.Fatalf("event %d: fast got %s, slow got %s, want %s", i, got[i].ID, gotSlow[i].ID, want[i].ID)
		}
	}
	pollUntil(t, "the slow subscription rejoined the tail", func() bool { return st.tail.memberCount() == 2 })
}

// TestTailReadsAtMostOncePerInterval: a tail woken again soon after a read pauses until
// TailInterval has passed since that read began, so that one read takes what committed in the
// meantime; every event is still delivered, in order.
func TestTailReadsAtMostOncePerInterval(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{PollInterval: time.Hour, TailInterval: time.Hour})
	var mu sync.Mutex
	var asked []time.Duration
	// The pause records what it was asked and returns at once: the test needs no clock.
	st.tail.pause = func(_ context.Context, d time.Duration) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, d)
		return true
	}
	ctx := testCtx(t)
	sub := tailSubscription(t, ctx, st)
	for i := range 3 {
		ev := event("Paced")
		if _, err := st.Append(ctx, fmt.Sprintf("paced-%d", i), eventstore.NoStream(), ev); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, sub, 1)[0]; got.ID != ev.ID {
			t.Fatalf("event %d: got %s, want %s", i, got.ID, ev.ID)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 {
		t.Fatal("the tail read again at once after each wake-up: no pause was asked for")
	}
	for _, d := range asked {
		if d <= 0 || d > time.Hour {
			t.Fatalf("paused for %v, want the rest of the interval since the last read began", d)
		}
	}
}

// TestTailIntervalNegativeMeansNone: a negative TailInterval reads on every wake-up.
func TestTailIntervalNegativeMeansNone(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{PollInterval: time.Hour, TailInterval: -1})
	var paused atomic.Int32
	st.tail.pause = func(context.Context, time.Duration) bool { paused.Add(1); return true }
	ctx := testCtx(t)
	sub := tailSubscription(t, ctx, st)
	for i := range 3 {
		if _, err := st.Append(ctx, fmt.Sprintf("unpaced-%d", i), eventstore.NoStream(), event("Unpaced")); err != nil {
			t.Fatal(err)
		}
		receive(t, sub, 1)
	}
	if n := paused.Load(); n != 0 {
		t.Fatalf("%d pauses with a negative TailInterval", n)
	}
}

// tailSubscription subscribes to the whole log of st, as its tail's only member.
func tailSubscription(t *testing.T, ctx context.Context, st *Store) eventstore.Subscription {
	t.Helper()
	sub, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	pollUntil(t, "the subscription joined the tail", func() bool { return st.tail.memberCount() == 1 })
	return sub
}
