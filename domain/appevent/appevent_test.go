package appevent_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/appevent"
)

var t0 = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

// An id is received once per DedupWindow; a reception past it is new, with a new event id.
func TestReceiveOncePerWindow(t *testing.T) {
	var s appevent.State
	evs, _ := appevent.DecideReceive(s, "appevent-x", appevent.Received{ID: "x", Name: "a"}, t0)
	if len(evs) != 1 {
		t.Fatal("first reception not recorded")
	}
	s = s.Evolve(evs[0])
	first := s.Last.EventID
	if evs, _ := appevent.DecideReceive(s, "appevent-x", appevent.Received{ID: "x"}, t0.Add(appevent.DedupWindow-time.Second)); len(evs) != 0 {
		t.Fatal("received twice within the window")
	}
	evs, _ = appevent.DecideDelivered(s, first, []appevent.Run{{WorkflowID: "w", RunID: "r"}}, t0)
	s = s.Evolve(evs[0])
	if evs, _ := appevent.DecideDelivered(s, first, nil, t0); len(evs) != 0 || len(s.Runs) != 1 {
		t.Fatal("delivered twice")
	}
	evs, _ = appevent.DecideReceive(s, "appevent-x", appevent.Received{ID: "x"}, t0.Add(appevent.DedupWindow))
	if len(evs) != 1 {
		t.Fatal("a reception past the window was refused")
	}
	s = s.Evolve(evs[0])
	if s.Last.EventID == first || s.Delivered {
		t.Fatalf("second reception %+v reuses the first's id or runs", s)
	}
	// The same reception decided again (a retry) gets the same id.
	again, _ := appevent.DecideReceive(appevent.State{}, "appevent-x", appevent.Received{}, t0)
	if again[0].(appevent.Received).EventID != first {
		t.Fatal("event ids are not derived from the reception")
	}
}
