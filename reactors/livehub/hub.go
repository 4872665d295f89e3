// Package livehub fans the event log out to the requests of this process that wait on one
// stream: SSE connections and submits with waitForMs. One subscription per process feeds it.
//
// A watcher is told that its stream changed; one that asks (WatchRecords) is also handed the
// stream's records as the log brings them, up to a bound, so that it need not read them back
// from the store. Whenever that is not the whole story (the bound was passed, or a writer
// nudged the stream ahead of the log) it folds the stream from the event store, which is
// authoritative. So a slow watcher loses nothing (notices coalesce), and a watcher that
// registers before reading the current state cannot miss an update between the two.
package livehub

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/feed"
)

// Hub delivers change notices per stream.
type Hub struct {
	store  eventstore.Store
	filter eventstore.Filter
	log    logrus.FieldLogger

	mu       sync.Mutex
	watchers map[string]map[*Watch]struct{}
	// delivered holds, for the streams announced (Expect), the revision after the last record
	// the hub delivered of each; expected lists them oldest first, to forget the oldest past
	// maxExpected.
	delivered map[string]uint64
	expected  []string
}

// maxExpected bounds the streams the hub tracks for Delivered: a stream forgotten is read
// from the store, as any stream not announced is.
const maxExpected = 1 << 16

// New returns a hub over the events store selects with filter (by category, for example).
func New(store eventstore.Store, filter eventstore.Filter, log logrus.FieldLogger) *Hub {
	if log == nil {
		log = logrus.StandardLogger()
	}
	return &Hub{store: store, filter: filter, log: log.WithField("component", "livehub"), watchers: map[string]map[*Watch]struct{}{}, delivered: map[string]uint64{}}
}

// Watch is one waiter's registration on a stream.
type Watch struct {
	// C receives a value when the stream may have changed; notices coalesce.
	C      <-chan struct{}
	c      chan struct{}
	hub    *Hub
	stream string

	// keep: the watch holds the records the log brings (WatchRecords), in recs, until
	// Records takes them; partial once they are not all that happened since.
	keep    bool
	mu      sync.Mutex
	recs    []eventstore.RecordedEvent
	partial bool
	// ended: the last Ended a writer handed the stream (NotifyEnded), until Ended takes it.
	ended *Ended
}

// Ended is a stream's state at its end, as the writer that ended it holds it: State (whose
// type the writer and the watcher agree on) folded to Revision. A state that no later event
// changes may be sent as is, so a watcher that takes it need not read the stream back.
type Ended struct {
	Revision uint64
	State    any
}

// maxKept bounds the records a watch holds between two Records: a run's step writes a few
// at a time, and a watcher that falls further behind reads the store instead.
const maxKept = 32

// Watch registers interest in stream; call it before reading the stream's current state.
func (h *Hub) Watch(stream string) *Watch { return h.watch(stream, false) }

// WatchRecords is Watch for a watcher that also takes the stream's records (Records).
func (h *Hub) WatchRecords(stream string) *Watch { return h.watch(stream, true) }

func (h *Hub) watch(stream string, keep bool) *Watch {
	c := make(chan struct{}, 1)
	w := &Watch{C: c, c: c, hub: h, stream: stream, keep: keep}
	h.mu.Lock()
	set := h.watchers[stream]
	if set == nil {
		set = map[*Watch]struct{}{}
		h.watchers[stream] = set
	}
	set[w] = struct{}{}
	h.mu.Unlock()
	return w
}

// Records takes the records the log brought since the last call, in log order; complete is
// false when they are not everything that may have happened since (too many came, or a writer
// nudged the stream ahead of the log): the watcher then reads the store.
func (w *Watch) Records() (recs []eventstore.RecordedEvent, complete bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	recs, complete = w.recs, !w.partial
	w.recs, w.partial = nil, false
	return recs, complete
}

// add keeps rec for Records (nil: a nudge with no record).
func (w *Watch) add(rec *eventstore.RecordedEvent) {
	if !w.keep {
		return
	}
	w.mu.Lock()
	if rec == nil || len(w.recs) >= maxKept {
		w.recs, w.partial = nil, true
	} else {
		w.recs = append(w.recs, *rec)
	}
	w.mu.Unlock()
}

// Ended takes the end a writer handed the stream (NotifyEnded) since the last call, if any.
// The watch's records stay complete either way: a watcher that cannot use it folds them.
func (w *Watch) Ended() (Ended, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.ended
	w.ended = nil
	if e == nil {
		return Ended{}, false
	}
	return *e, true
}

// Close unregisters the watch at once, freeing it.
func (w *Watch) Close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if set := h.watchers[w.stream]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(h.watchers, w.stream)
		}
	}
}

// Watchers counts registered watches, for metrics and tests.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, set := range h.watchers {
		n += len(set)
	}
	return n
}

// Notify tells the watchers of stream that it may have changed. The log tells them of every
// change anyway; a writer in this process calls it to have them look at once, ahead of the
// log's tail (the scheduler when a run ends).
func (h *Hub) Notify(stream string) { h.notify(stream, nil) }

// NotifyEnded is Notify with the stream's final state, which the writer that ended it holds
// (the scheduler at a run's end): watchers that keep records take it (Watch.Ended) instead of
// reading the stream back, and lose no record if they do not, for the log brings them all.
func (h *Hub) NotifyEnded(stream string, end Ended) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers[stream] {
		if w.keep {
			w.mu.Lock()
			if w.ended == nil || w.ended.Revision < end.Revision {
				w.ended = &end
			}
			w.mu.Unlock()
		}
		select {
		case w.c <- struct{}{}:
		default: // a notice is pending already
		}
	}
}

// Expect has the hub track, from now on, which of stream's records it has delivered
// (Delivered). Call it before the stream's first record is written (a run's trigger): a
// watcher that registers later and finds nothing delivered past a state it holds knows that
// every record after that state is yet to come to it, and need not read the stream.
func (h *Hub) Expect(stream string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.delivered[stream]; ok {
		return
	}
	if len(h.expected) >= maxExpected {
		delete(h.delivered, h.expected[0])
		h.expected = h.expected[1:]
	}
	h.delivered[stream] = 0
	h.expected = append(h.expected, stream)
}

// Delivered reports the revision after the last record of stream the hub has delivered (0:
// none), for a stream announced with Expect and not forgotten since; false otherwise. Watch
// the stream first: what the hub delivers after Delivered answers goes to the watch.
func (h *Hub) Delivered(stream string) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next, ok := h.delivered[stream]
	return next, ok
}

// notify wakes stream's watchers, handing rec to those that keep records.
func (h *Hub) notify(stream string, rec *eventstore.RecordedEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec != nil {
		if next, ok := h.delivered[stream]; ok && rec.Revision >= next {
			h.delivered[stream] = rec.Revision + 1
		}
	}
	for w := range h.watchers[stream] {
		w.add(rec)
		select {
		case w.c <- struct{}{}:
		default: // a notice is pending already
		}
	}
}

// Start subscribes from the head of the log before returning, so every append after Start
// returns reaches the watchers; then it feeds them until ctx ends.
func (h *Hub) Start(ctx context.Context) error {
	events, err := feed.Open(ctx, h.store, h.filter, h.log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped during start-up: there is nothing left to watch for
		}
		return fmt.Errorf("live hub: %w", err)
	}
	go func() {
		for ev := range events {
			h.notify(ev.Stream, &ev)
		}
	}()
	return nil
}

// Until waits until done reports true, checking it at once and again on every notice of
// stream (and at least every recheck, for safety), or until ctx ends.
func (h *Hub) Until(ctx context.Context, stream string, recheck time.Duration, done func() (bool, error)) error {
	w := h.Watch(stream)
	defer w.Close()
	t := time.NewTicker(recheck)
	defer t.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.C:
		case <-t.C:
		}
	}
}
