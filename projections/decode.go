package projections

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/eventstore"
)

// decode turns a recorded event into its domain value; failure is ErrDecode, which stops the
// projector rather than letting it skip the event. The value is shared with the other
// projectors of this process (decoded): it is read, never changed.
func decode(ev eventstore.RecordedEvent) (domain.Event, error) {
	if e, ok := decoded.get(ev); ok {
		return e, nil
	}
	e, err := domain.Events.Decode(ev.Type, ev.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	decoded.put(ev, e)
	return e, nil
}

// decoded holds the events the projectors of this process decoded last. Each event of a run
// or an execution goes to three or four projectors at about the same time, and decoding its
// JSON was most of their CPU (docs/performance.md, Workflow runs).
var decoded = newDecodeMemo(1 << 13)

// decodeMemo is a bounded map from event ID to decoded value, oldest out first. An entry
// answers only for the same type and bytes, so two logs in one process (tests) cannot mix.
type decodeMemo struct {
	mu      sync.Mutex
	entries map[uuid.UUID]memoEntry
	order   []uuid.UUID // a ring: next is the oldest once it is full
	next    int
}

type memoEntry struct {
	typ   string
	data  []byte
	event domain.Event
}

func newDecodeMemo(size int) *decodeMemo {
	return &decodeMemo{entries: make(map[uuid.UUID]memoEntry, size), order: make([]uuid.UUID, 0, size)}
}

func (m *decodeMemo) get(ev eventstore.RecordedEvent) (domain.Event, bool) {
	m.mu.Lock()
	en, ok := m.entries[ev.ID]
	m.mu.Unlock()
	if !ok || en.typ != ev.Type || !bytes.Equal(en.data, ev.Data) {
		return nil, false
	}
	return en.event, true
}

func (m *decodeMemo) put(ev eventstore.RecordedEvent, e domain.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[ev.ID]; ok {
		return
	}
	if len(m.order) < cap(m.order) {
		m.order = append(m.order, ev.ID)
	} else {
		delete(m.entries, m.order[m.next])
		m.order[m.next] = ev.ID
		m.next = (m.next + 1) % len(m.order)
	}
	m.entries[ev.ID] = memoEntry{typ: ev.Type, data: ev.Data, event: e}
}

// typesOf lists the stored type names of events, for a projector's filter.
func typesOf(events ...domain.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.EventType()
	}
	return out
}

// Page is the page/limit convention of every list (SPEC.md 4.9).
type Page struct {
	Page  int
	Limit int
}

// Offset is the number of rows before the page.
func (p Page) Offset() int { return (p.Page - 1) * p.Limit }

// TotalPages is how many pages of p.Limit hold total rows.
func (p Page) TotalPages(total int) int {
	if p.Limit <= 0 {
		return 0
	}
	return (total + p.Limit - 1) / p.Limit
}
