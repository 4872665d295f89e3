package decoded

import (
	"testing"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

func recorded(t *testing.T, id uuid.UUID, e domain.Event) eventstore.RecordedEvent {
	t.Helper()
	data, err := domain.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return eventstore.RecordedEvent{ID: id, Type: e.EventType(), Data: data}
}

// TestMemoAnswersOnlyForTheSameEvent: an event decoded once is answered from the memo;
// the same ID with other bytes (another log in this process) is decoded afresh.
func TestMemoAnswersOnlyForTheSameEvent(t *testing.T) {
	m := newMemo(4, 1<<20)
	id := uuid.New()
	a := recorded(t, id, run.Finished{RunID: "run-a"})
	if _, ok := m.get(a); ok {
		t.Fatal("an empty memo answered")
	}
	m.put(a, run.Finished{RunID: "run-a"})
	if e, ok := m.get(a); !ok || e.(run.Finished).RunID != "run-a" {
		t.Fatalf("get = %v, %v; want the value put", e, ok)
	}
	b := recorded(t, id, run.Finished{RunID: "run-b"})
	if _, ok := m.get(b); ok {
		t.Fatal("the memo answered for the same ID with other bytes")
	}
	b.Type = "RunTriggered"
	b.Data = a.Data
	if _, ok := m.get(b); ok {
		t.Fatal("the memo answered for the same ID and bytes under another type")
	}
}

// TestMemoHoldsAtMostItsSize: the oldest entries go first once the memo is full.
func TestMemoHoldsAtMostItsSize(t *testing.T) {
	m := newMemo(3, 1<<20)
	var evs []eventstore.RecordedEvent
	for range 5 {
		ev := recorded(t, uuid.New(), run.Finished{RunID: "r"})
		evs = append(evs, ev)
		m.put(ev, run.Finished{RunID: "r"})
	}
	if len(m.entries) != 3 {
		t.Fatalf("%d entries, want 3", len(m.entries))
	}
	for i, ev := range evs {
		if _, ok := m.get(ev); ok != (i >= 2) {
			t.Fatalf("event %d held = %v, want only the last 3 held", i, ok)
		}
	}
}

// TestEventSharesOneValue: a second decode of an event returns what the first did.
func TestEventSharesOneValue(t *testing.T) {
	ev := recorded(t, uuid.New(), run.Finished{RunID: "shared"})
	first, err := Event(ev)
	if err != nil {
		t.Fatal(err)
	}
	ev.Data = append([]byte(nil), ev.Data...) // another copy of the bytes, as another subscription may hold
	second, err := Event(ev)
	if err != nil || second.(run.Finished).RunID != first.(run.Finished).RunID {
		t.Fatalf("second decode = %v, %v", second, err)
	}
	if _, ok := recent.get(ev); !ok {
		t.Fatal("Event did not keep the event for the other consumers")
	}
}

// TestMemoHoldsAtMostItsBytes: the memo forgets the oldest entries to stay within its bytes,
// and keeps no event larger than maxEntryBytes.
func TestMemoHoldsAtMostItsBytes(t *testing.T) {
	one := recorded(t, uuid.New(), run.Finished{RunID: "r"})
	m := newMemo(100, 3*len(one.Data))
	for range 5 {
		ev := recorded(t, uuid.New(), run.Finished{RunID: "r"})
		m.put(ev, run.Finished{RunID: "r"})
	}
	if len(m.entries) != 3 || m.bytes != 3*len(one.Data) {
		t.Fatalf("%d entries of %d bytes, want 3 of %d", len(m.entries), m.bytes, 3*len(one.Data))
	}
	big := eventstore.RecordedEvent{ID: uuid.New(), Type: "RunFinished", Data: make([]byte, maxEntryBytes+1)}
	m.put(big, run.Finished{})
	if _, ok := m.get(big); ok || len(m.entries) != 3 {
		t.Fatal("the memo kept an event larger than maxEntryBytes")
	}
}
