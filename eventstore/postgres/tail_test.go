package postgres

import (
	"fmt"
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
