// Package decoded turns the log's records into domain events once per process: each event
// goes to several consumers of this process at about the same time (the projectors, the
// executor's feeds), and decoding its JSON was most of what they spent on it
// (docs/performance.md). The values are shared: read them, never change them.
package decoded

import (
	"bytes"
	"sync"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/eventstore"
)

// Event decodes rec (domain.Events.Decode), answering from the events this process decoded
// last when rec is one of them.
func Event(rec eventstore.RecordedEvent) (domain.Event, error) {
	if e, ok := recent.get(rec); ok {
		return e, nil
	}
	e, err := domain.Events.Decode(rec.Type, rec.Data)
	if err != nil {
		return nil, err
	}
	recent.put(rec, e)
	return e, nil
}

// recent holds the events decoded last: a few seconds of a busy log, in at most 16 MiB of
// their JSON (the decoded values hold about as much again).
var recent = newMemo(1<<13, 16<<20)

// maxEntryBytes leaves an event of a large input out of the memo: its consumers decode it
// each, rather than the memo holding on to it.
const maxEntryBytes = 16 << 10

// memo is a bounded map from event ID to decoded value, oldest out first. An entry
// answers only for the same type and bytes, so two logs in one process (tests) cannot mix.
type memo struct {
	mu       sync.Mutex
	entries  map[uuid.UUID]memoEntry
	ring     []uuid.UUID // the entries' IDs, oldest at head
	head, n  int
	bytes    int // the JSON the entries hold
	maxBytes int
}

type memoEntry struct {
	typ   string
	data  []byte
	event domain.Event
}

func newMemo(size, maxBytes int) *memo {
	return &memo{entries: make(map[uuid.UUID]memoEntry, size), ring: make([]uuid.UUID, size), maxBytes: maxBytes}
}

func (m *memo) get(ev eventstore.RecordedEvent) (domain.Event, bool) {
	m.mu.Lock()
	en, ok := m.entries[ev.ID]
	m.mu.Unlock()
	if !ok || en.typ != ev.Type || !bytes.Equal(en.data, ev.Data) {
		return nil, false
	}
	return en.event, true
}

func (m *memo) put(ev eventstore.RecordedEvent, e domain.Event) {
	if len(ev.Data) > maxEntryBytes {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[ev.ID]; ok {
		return
	}
	for m.n == len(m.ring) || (m.n > 0 && m.bytes+len(ev.Data) > m.maxBytes) {
		m.evictOldest()
	}
	m.ring[(m.head+m.n)%len(m.ring)] = ev.ID
	m.n++
	m.bytes += len(ev.Data)
	m.entries[ev.ID] = memoEntry{typ: ev.Type, data: ev.Data, event: e}
}

func (m *memo) evictOldest() {
	id := m.ring[m.head]
	m.bytes -= len(m.entries[id].data)
	delete(m.entries, id)
	m.head = (m.head + 1) % len(m.ring)
	m.n--
}
