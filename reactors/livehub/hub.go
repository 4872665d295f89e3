// Package livehub fans the event log out to the requests of this process that wait on one
// stream: SSE connections and submits with waitForMs. One subscription per process feeds it.
//
// A watcher is only told that its stream changed, never what changed: it folds the stream
// from the event store, which is authoritative. So a slow watcher loses nothing (notices
// coalesce), and a watcher that registers before reading the current state cannot miss an
// update between the two.
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
}

// New returns a hub over the events store selects with filter (by category, for example).
func New(store eventstore.Store, filter eventstore.Filter, log logrus.FieldLogger) *Hub {
	if log == nil {
		log = logrus.StandardLogger()
	}
	return &Hub{store: store, filter: filter, log: log.WithField("component", "livehub"), watchers: map[string]map[*Watch]struct{}{}}
}

// Watch is one waiter's registration on a stream.
type Watch struct {
	// C receives a value when the stream may have changed; notices coalesce.
	C      <-chan struct{}
	c      chan struct{}
	hub    *Hub
	stream string
}

// Watch registers interest in stream; call it before reading the stream's current state.
func (h *Hub) Watch(stream string) *Watch {
	c := make(chan struct{}, 1)
	w := &Watch{C: c, c: c, hub: h, stream: stream}
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
func (h *Hub) Notify(stream string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers[stream] {
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
			h.Notify(ev.Stream)
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
