package projections

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard/switchyard/eventstore"
)

// collectResult runs collect in a goroutine and returns its batch, failing the test when it
// does not return within a minute.
func collectResult(t *testing.T, events <-chan eventstore.RecordedEvent, max int, notBefore time.Time) []eventstore.RecordedEvent {
	t.Helper()
	done := make(chan []eventstore.RecordedEvent, 1)
	go func() {
		batch, _ := collect(context.Background(), events, max, notBefore)
		done <- batch
	}()
	select {
	case batch := <-done:
		return batch
	case <-time.After(time.Minute):
		t.Fatal("collect did not return")
		return nil
	}
}

// TestCollectGathersUntilNotBefore: events that arrive one by one after the first, before
// notBefore, join the first's batch. Without the interval each would be a batch of its own
// (the channel is unbuffered, so none is ready when collect looks).
func TestCollectGathersUntilNotBefore(t *testing.T) {
	events := make(chan eventstore.RecordedEvent)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := range 3 {
			select {
			case events <- eventstore.RecordedEvent{Revision: uint64(i)}:
			case <-ctx.Done():
				return
			}
		}
	}()
	batch := collectResult(t, events, 3, time.Now().Add(time.Hour))
	if len(batch) != 3 {
		t.Fatalf("batch of %d events, want the 3 sent before notBefore", len(batch))
	}
	for i, ev := range batch {
		if ev.Revision != uint64(i) {
			t.Fatalf("event %d is revision %d: out of order", i, ev.Revision)
		}
	}
}

// TestCollectEndsAtNotBefore: with fewer events than max, the batch is applied once notBefore
// passes, not held until it fills.
func TestCollectEndsAtNotBefore(t *testing.T) {
	events := make(chan eventstore.RecordedEvent, 1)
	events <- eventstore.RecordedEvent{}
	if batch := collectResult(t, events, 500, time.Now().Add(20*time.Millisecond)); len(batch) != 1 {
		t.Fatalf("batch of %d events, want 1", len(batch))
	}
}

// TestCollectAfterAnIdleIntervalTakesOnlyWhatIsReady: a notBefore already past (the projector
// was idle for its interval) applies the ready events at once, without waiting for more.
func TestCollectAfterAnIdleIntervalTakesOnlyWhatIsReady(t *testing.T) {
	events := make(chan eventstore.RecordedEvent, 4)
	events <- eventstore.RecordedEvent{}
	events <- eventstore.RecordedEvent{}
	if batch := collectResult(t, events, 500, time.Now().Add(-time.Second)); len(batch) != 2 {
		t.Fatalf("batch of %d events, want the 2 ready", len(batch))
	}
	// A closed channel ends the batch (and the subscription) without waiting for notBefore.
	events <- eventstore.RecordedEvent{}
	close(events)
	if batch := collectResult(t, events, 500, time.Now().Add(time.Hour)); len(batch) != 1 {
		t.Fatalf("batch of %d events from a closed channel, want 1", len(batch))
	}
}
