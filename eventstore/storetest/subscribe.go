package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/switchyard/switchyard/eventstore"
)

func (s *suite) testSubscribeCatchUpThenLive(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	// More than one read batch of a typical backend (1000), so catch-up pages.
	var stored []eventstore.EventData
	for range 3 {
		evs := events("Stored", 400)
		mustAppend(t, st, stream("catchup"), eventstore.NoStream(), evs...)
		stored = append(stored, evs...)
	}
	small := events("Stored", 1)
	mustAppend(t, st, stream("catchup"), eventstore.NoStream(), small...)
	stored = append(stored, small...)

	sub := subscribe(t, ctx, st, eventstore.Start, eventstore.Filter{})
	caught := receive(t, sub, len(stored))
	sameIDs(t, "catch-up", ids(caught), dataIDs(stored))
	checkIncreasing(t, caught)
	logged := readAllVisible(t, st, len(stored), eventstore.Filter{})
	sameIDs(t, "catch-up against ReadAll", ids(caught), ids(logged))

	// Live: each append arrives after the subscription has caught up.
	name := stream("live")
	prev := caught[len(caught)-1]
	for i := range 3 {
		ev := event("Live")
		mustAppend(t, st, name, eventstore.Any(), ev)
		got := receive(t, sub, 1)[0]
		checkRecorded(t, got, ev, name, uint64(i))
		if !prev.Position.Less(got.Position) {
			t.Fatalf("live event at %s does not come after %s", got.Position, prev.Position)
		}
		prev = got
	}
}

func (s *suite) testSubscribeResume(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	var appended []eventstore.EventData
	for range 3 {
		evs := events("Resumed", 2)
		mustAppend(t, st, stream("resume"), eventstore.NoStream(), evs...)
		appended = append(appended, evs...)
	}
	logged := readAllVisible(t, st, len(appended), eventstore.Filter{})

	// A subscriber that has handled event 2 resumes from its position: strictly after it.
	sub := subscribe(t, ctx, st, logged[2].Position, eventstore.Filter{})
	got := receive(t, sub, 3)
	sameIDs(t, "resumed", ids(got), ids(logged[3:]))

	live := event("Resumed")
	mustAppend(t, st, stream("resume"), eventstore.NoStream(), live)
	if got := receive(t, sub, 1)[0]; got.ID != live.ID {
		t.Fatalf("after catching up, got %s, want the new event %s", got.ID, live.ID)
	}
}

func (s *suite) testSubscribeFromHead(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	res := mustAppend(t, st, stream("head"), eventstore.NoStream(), events("Old", 3)...)
	var head eventstore.Position
	waitFor(t, "head at the last append", func() (bool, error) {
		var err error
		head, err = st.HeadPosition(ctx)
		return head == res.Position, err
	})
	sub := subscribe(t, ctx, st, head, eventstore.Filter{})
	ev := event("New")
	mustAppend(t, st, stream("head"), eventstore.NoStream(), ev)
	if got := receive(t, sub, 1)[0]; got.ID != ev.ID {
		t.Fatalf("subscription from the head delivered %s (%s), want only the new event %s", got.ID, got.Type, ev.ID)
	}
}

func (s *suite) testSubscribeFilters(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	// Half the log is stored before the subscriptions start, half arrives live.
	before, _, _, _ := logFixture(t, st)
	subs := make([]eventstore.Subscription, len(fixtureFilters))
	for i, f := range fixtureFilters {
		subs[i] = subscribe(t, ctx, st, eventstore.Start, f.filter)
	}
	after, _, _, _ := logFixture(t, st)
	all := append(append([]eventstore.EventData(nil), before...), after...)
	// One last event per filter that it matches, so every subscription (NoMatch included) has
	// something to deliver live, and its last delivery is known.
	for _, f := range fixtureFilters {
		category, typ := "alpha", "A"
		if len(f.filter.Categories) > 0 {
			category = f.filter.Categories[0]
		}
		if len(f.filter.Types) > 0 {
			typ = f.filter.Types[0]
		}
		ev := event(typ)
		mustAppend(t, st, stream(category), eventstore.NoStream(), ev)
		all = append(all, ev)
	}
	logged := readAllVisible(t, st, len(all), eventstore.Filter{})
	sameIDs(t, "log", ids(logged), dataIDs(all))
	streams := streamsOf(t, logged)

	for i, f := range fixtureFilters {
		want := expectedLog(all, streams, f.filter)
		got := receive(t, subs[i], len(want))
		sameIDs(t, f.name, ids(got), want)
		checkIncreasing(t, got)
		for _, ev := range got {
			if !f.filter.Matches(ev) {
				t.Fatalf("%s: delivered %s event of stream %s", f.name, ev.Type, ev.Stream)
			}
		}
	}
}

func (s *suite) testSubscribeClose(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	mustAppend(t, st, stream("close"), eventstore.NoStream(), events("Closed", 3)...)
	sub, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	receive(t, sub, 1)
	sub.Close()
	if err := expectEnded(t, sub); err != nil {
		t.Fatalf("Err after Close = %v, want nil", err)
	}
	sub.Close() // a second Close is harmless
	// The store is still usable.
	mustAppend(t, st, stream("close"), eventstore.NoStream(), event("After"))
}

func (s *suite) testSubscribeContextCancel(t *testing.T) {
	st := s.store(t)
	ctx, cancel := context.WithCancel(testContext(t))
	sub, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Close()
	ev := event("Cancelled")
	mustAppend(t, st, stream("cancel"), eventstore.NoStream(), ev)
	if got := receive(t, sub, 1)[0]; got.ID != ev.ID {
		t.Fatalf("got %s, want %s", got.ID, ev.ID)
	}
	cancel()
	if err := expectEnded(t, sub); err != nil {
		t.Fatalf("Err after context cancellation = %v, want nil", err)
	}
}

func (s *suite) testSubscribeStoreClose(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	sub, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Close()
	mustAppend(t, st, stream("storeclose"), eventstore.NoStream(), event("Closing"))
	receive(t, sub, 1)
	if err := st.Close(); err != nil {
		t.Fatalf("close store: %v", err)
	}
	if err := expectEnded(t, sub); err != nil && !errors.Is(err, eventstore.ErrClosed) {
		t.Fatalf("Err after the store closed = %v, want nil or ErrClosed", err)
	}
	if _, err := st.Append(ctx, stream("storeclose"), eventstore.Any(), event("Late")); !errors.Is(err, eventstore.ErrClosed) {
		t.Fatalf("Append after Close: err = %v, want ErrClosed", err)
	}
	if _, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{}); !errors.Is(err, eventstore.ErrClosed) {
		t.Fatalf("Subscribe after Close: err = %v, want ErrClosed", err)
	}
}
