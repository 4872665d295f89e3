package projections

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard/switchyard/eventstore"
)

// arriving returns a pause that records the wait it was asked for and, instead of waiting,
// sends n events with revisions from first on, as if they arrived during the pause.
func arriving(events chan<- eventstore.RecordedEvent, first, n int, asked *time.Duration) func(context.Context, time.Duration) bool {
	return func(_ context.Context, d time.Duration) bool {
		*asked = d
		for i := range n {
			events <- eventstore.RecordedEvent{Revision: uint64(first + i)}
		}
		return true
	}
}

// TestCollectGathersUntilNotBefore: the events that arrive after the first, before notBefore,
// join its batch, in order, up to max.
func TestCollectGathersUntilNotBefore(t *testing.T) {
	events := make(chan eventstore.RecordedEvent, 8)
	events <- eventstore.RecordedEvent{Revision: 0}
	var asked time.Duration
	batch, ok := collect(context.Background(), events, 3, time.Now().Add(time.Hour), arriving(events, 1, 4, &asked), idleWatch{})
	if !ok || len(batch) != 3 {
		t.Fatalf("batch of %d events (ok %v), want 3: the first and those that arrived before notBefore, up to max", len(batch), ok)
	}
	for i, ev := range batch {
		if ev.Revision != uint64(i) {
			t.Fatalf("event %d is revision %d: out of order", i, ev.Revision)
		}
	}
	if asked <= 0 || asked > time.Hour {
		t.Fatalf("paused for %v, want the time left until notBefore", asked)
	}
	if len(events) != 2 {
		t.Fatalf("%d events left for the next batch, want 2", len(events))
	}
}

// TestCollectAfterAnIdleIntervalDoesNotPause: when notBefore has passed (the projector was idle
// for its interval) the ready events are applied at once.
func TestCollectAfterAnIdleIntervalDoesNotPause(t *testing.T) {
	events := make(chan eventstore.RecordedEvent, 8)
	events <- eventstore.RecordedEvent{}
	events <- eventstore.RecordedEvent{}
	var asked time.Duration
	batch, _ := collect(context.Background(), events, 500, time.Now().Add(-time.Second), arriving(events, 2, 3, &asked), idleWatch{})
	if asked != 0 || len(batch) != 2 {
		t.Fatalf("paused %v, batch of %d; want no pause and the 2 ready events", asked, len(batch))
	}
}

// TestCollectEndsOnAClosedSubscription: a closed channel ends the batch and, once empty, the
// subscription.
func TestCollectEndsOnAClosedSubscription(t *testing.T) {
	events := make(chan eventstore.RecordedEvent, 2)
	events <- eventstore.RecordedEvent{}
	close(events)
	if batch, ok := collect(context.Background(), events, 500, time.Now().Add(time.Hour), func(context.Context, time.Duration) bool { return true }, idleWatch{}); !ok || len(batch) != 1 {
		t.Fatalf("batch of %d (ok %v), want the 1 sent", len(batch), ok)
	}
	if _, ok := collect(context.Background(), events, 500, time.Time{}, sleep, idleWatch{}); ok {
		t.Fatal("collect on a closed, empty subscription reported a batch")
	}
}

// TestSubscribeAfterCloseStartsNothing: the router may close the subscriber (from a handler
// that has started) while it still subscribes the other handlers; a Subscribe after Close
// ends at once and starts no feed, so Close's wait covers every feed there is.
func TestSubscribeAfterCloseStartsNothing(t *testing.T) {
	p := &positions{}
	e, err := NewEngine(nil, nil, []Projector{p}, EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s := &subscriber{engine: e, closing: make(chan struct{})}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := s.Subscribe(context.Background(), p.Name())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-out:
		if open {
			t.Fatal("a closed subscriber delivered a message")
		}
	default:
		t.Fatal("Subscribe after Close returned a channel that is not closed: a feed started after Close's wait")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}
