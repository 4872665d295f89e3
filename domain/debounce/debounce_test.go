package debounce_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/debounce"
	"github.com/switchyard/switchyard/domain/workflow"
)

var t0 = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

var cfg = workflow.DebounceConfig{QuietMs: 1000, MaxWaitMs: 5000, MaxItems: 3}

func buffer(t *testing.T, s debounce.State, id, payload string, at time.Time) debounce.State {
	t.Helper()
	evs, err := debounce.DecideBuffer(s, debounce.Buffered{DeliveryID: id, Payload: json.RawMessage(payload)}, cfg, at)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		s = s.Evolve(e)
	}
	return s
}

func TestDueByQuietThenMaxWaitThenItems(t *testing.T) {
	var s debounce.State
	if due, _ := s.Due(); !due.IsZero() {
		t.Fatal("an empty window is never due")
	}
	s = buffer(t, s, "a", `{"n":1}`, t0)
	if due, why := s.Due(); !due.Equal(t0.Add(time.Second)) || why != debounce.ReasonQuiet {
		t.Fatalf("one delivery: due %v (%s)", due, why)
	}
	s = buffer(t, s, "a", `{"n":1}`, t0.Add(500*time.Millisecond)) // the same delivery again: nothing new
	if len(s.Items) != 1 {
		t.Fatalf("a repeated delivery was gathered twice: %d items", len(s.Items))
	}
	s = buffer(t, s, "b", `{"n":2}`, t0.Add(4500*time.Millisecond))
	if due, why := s.Due(); !due.Equal(t0.Add(5*time.Second)) || why != debounce.ReasonMaxWait {
		t.Fatalf("a busy key: due %v (%s), want the max wait", due, why)
	}
	s = buffer(t, s, "c", `{"n":3}`, t0.Add(4600*time.Millisecond))
	if due, why := s.Due(); !due.Equal(t0.Add(4600*time.Millisecond)) || why != debounce.ReasonMaxItems {
		t.Fatalf("a full window: due %v (%s), want at once", due, why)
	}
	if _, err := debounce.DecideBuffer(s, debounce.Buffered{DeliveryID: "d", Payload: json.RawMessage(`{}`)}, cfg, t0); !errors.Is(err, debounce.ErrFull) {
		t.Fatalf("a fourth delivery: %v, want ErrFull", err)
	}
	if got := string(s.Body()); got != `{"events":[{"n":1},{"n":2},{"n":3}]}` {
		t.Fatalf("body %s", got)
	}
}

func TestFlushOnceWhenDue(t *testing.T) {
	s := buffer(t, debounce.State{}, "a", `{}`, t0)
	if evs, _ := debounce.DecideFlush(s, "run", t0.Add(999*time.Millisecond), false); len(evs) != 0 {
		t.Fatal("flushed before due")
	}
	evs, _ := debounce.DecideFlush(s, "run", t0.Add(time.Second), false)
	if len(evs) != 1 {
		t.Fatal("not flushed when due")
	}
	s = s.Evolve(evs[0])
	if evs, _ := debounce.DecideFlush(s, "run", t0.Add(2*time.Second), true); len(evs) != 0 {
		t.Fatal("flushed twice")
	}
	if _, err := debounce.DecideBuffer(s, debounce.Buffered{DeliveryID: "b", Payload: json.RawMessage(`{}`)}, cfg, t0); !errors.Is(err, debounce.ErrClosed) {
		t.Fatalf("a delivery to a flushed window: %v, want ErrClosed", err)
	}
	evs, _ = debounce.DecideStarted(s, "", t0)
	s = s.Evolve(evs[0])
	if evs, _ := debounce.DecideStarted(s, "", t0); len(evs) != 0 || !s.Started {
		t.Fatal("started twice")
	}
}

// A window that would pass MaxDebounceBytes is full: its run starts and the payload opens the
// next window.
func TestFullBySize(t *testing.T) {
	big := `{"x":"` + strings.Repeat("a", workflow.MaxDebounceBytes-100) + `"}`
	s := buffer(t, debounce.State{}, "a", big, t0)
	_, err := debounce.DecideBuffer(s, debounce.Buffered{DeliveryID: "b", Payload: json.RawMessage(big)}, cfg, t0)
	if !errors.Is(err, debounce.ErrFull) {
		t.Fatalf("got %v, want ErrFull", err)
	}
	evs, _ := debounce.DecideFlush(s, "run", t0, true)
	if len(evs) != 1 || evs[0].(debounce.Flushed).Reason != debounce.ReasonSize {
		t.Fatalf("forced flush %v", evs)
	}
	var _ domain.Event = evs[0]
}
