package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard/switchyard/eventstore"
)

// The tail is the Store's one reader of the live end of the log, shared by every subscription
// of the Store (so by every projector, reactor and live hub of the process, which all
// subscribe through it). A subscription first catches up by reading the log itself, with its
// own filter, in batches; once a read comes back short it joins the tail, which reads the whole
// log once per wake-up (local appends, NOTIFY from other processes, the poll) and hands each
// member the events its filter selects. Consumers that fall far behind are evicted and read on
// their own again until they catch up, so one slow projector never holds the others back and
// the tail never blocks.

// tailBatch is one read of the tail: events in (from, to], to being where the next read starts.
type tailBatch struct {
	from, to eventstore.Position
	events   []eventstore.RecordedEvent
}

// tailMember is a subscription fed by the tail.
type tailMember struct {
	filter  eventstore.Filter
	signal  chan struct{} // capacity 1: pending changed
	pending []tailBatch   // filtered, not yet taken by the subscription
	queued  int           // events in pending
	evicted bool          // fell too far behind, or the tail failed: read on your own
}

type tail struct {
	s *Store

	mu      sync.Mutex
	pos     eventstore.Position // everything up to pos has been read and handed out
	members map[*tailMember]struct{}
	recent  []tailBatch // the last batches, so a subscription just behind can join
	recentN int         // events in recent
	kick    chan struct{}
	once    sync.Once
	// pause waits before a read until TailInterval has passed since the last one began
	// (sleepCtx; tests replace it).
	pause func(ctx context.Context, d time.Duration) bool
}

// Limits of the tail's memory, in events (multiples of Config.BatchSize).
const (
	tailRecentBatches = 4 // kept for joining subscriptions
	tailMaxPending    = 8 // queued for one member before it is evicted
)

func (t *tail) start() {
	t.once.Do(func() {
		t.members = map[*tailMember]struct{}{}
		t.kick = make(chan struct{}, 1)
		t.s.wg.Add(1)
		go t.run()
	})
}

// join adds a subscription that has delivered everything up to cursor, or returns nil if the
// tail has moved past it further than it remembers (the subscription then reads again).
func (t *tail) join(cursor eventstore.Position, filter eventstore.Filter) *tailMember {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := &tailMember{filter: filter, signal: make(chan struct{}, 1)}
	switch {
	case !cursor.Less(t.pos):
		if len(t.members) == 0 {
			// Nobody depends on where an idle tail stands: start where the joiner is.
			t.pos, t.recent, t.recentN = cursor, nil, 0
		}
	case len(t.recent) > 0 && !cursor.Less(t.recent[0].from):
		for _, b := range t.recent {
			if cursor.Less(b.to) {
				m.add(b, cursor)
			}
		}
		m.signal <- struct{}{}
	default:
		return nil
	}
	t.members[m] = struct{}{}
	select {
	case t.kick <- struct{}{}: // read now: an append may have woken the tail before it had members
	default:
	}
	return m
}

// add queues the events of b after cursor that m's filter selects; t.mu is held.
func (m *tailMember) add(b tailBatch, cursor eventstore.Position) {
	fb := tailBatch{from: b.from, to: b.to}
	n := 0
	for _, ev := range b.events {
		if cursor.Less(ev.Position) && m.filter.Matches(ev) {
			n++
		}
	}
	if n > 0 {
		// Sized once: events are large values, and every member copies its share of each read.
		fb.events = make([]eventstore.RecordedEvent, 0, n)
		for _, ev := range b.events {
			if cursor.Less(ev.Position) && m.filter.Matches(ev) {
				fb.events = append(fb.events, ev)
			}
		}
	}
	m.pending = append(m.pending, fb)
	m.queued += len(fb.events)
}

func (t *tail) leave(m *tailMember) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.members, m)
}

// take hands m's queued batches over, and whether m was evicted.
func (t *tail) take(m *tailMember) ([]tailBatch, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := m.pending
	m.pending, m.queued = nil, 0
	return p, m.evicted
}

// evictAll sends every member back to reading on its own (the tail cannot read the log).
func (t *tail) evictAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for m := range t.members {
		t.evict(m)
	}
}

func (t *tail) evict(m *tailMember) {
	m.evicted = true
	delete(t.members, m)
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// publish hands one read, made from position from, to every member and moves the tail on.
func (t *tail) publish(from eventstore.Position, res logRead, full bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pos != from {
		return // an idle tail was moved to a joiner's position during the read: read again
	}
	b := tailBatch{from: t.pos, to: t.pos, events: res.events}
	if n := len(res.events); n > 0 {
		b.to = res.events[n-1].Position
	}
	if !full && b.to.Less(res.scanned) {
		b.to = res.scanned
	}
	if b.to == t.pos {
		return // nothing new, not even an empty stretch
	}
	limit := tailMaxPending * t.s.opts.BatchSize
	for m := range t.members {
		m.add(b, b.from)
		if m.queued > limit {
			t.evict(m)
			continue
		}
		select {
		case m.signal <- struct{}{}:
		default:
		}
	}
	t.pos = b.to
	t.recent = append(t.recent, b)
	t.recentN += len(b.events)
	for len(t.recent) > tailRecentBatches {
		t.recentN -= len(t.recent[0].events)
		t.recent = t.recent[1:]
	}
}

func (t *tail) idle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.members) == 0
}

func (t *tail) position() eventstore.Position {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pos
}

// run reads the log on every wake-up while the tail has members.
func (t *tail) run() {
	s := t.s
	defer s.wg.Done()
	poll := time.NewTicker(s.opts.PollInterval)
	defer poll.Stop()
	var held heldWatch
	var lastRead time.Time
	pause := t.pause
	if pause == nil {
		pause = sleepCtx
	}
	for {
		wake := s.wake.wait()
		for !t.idle() {
			lastRead = time.Now()
			from := t.position()
			res, err := s.readLog(s.ctx, from, s.opts.BatchSize, eventstore.Filter{})
			if err != nil {
				if s.ctx.Err() != nil {
					return
				}
				// Members retry on their own, with their own deadline for giving up.
				s.log.WithError(err).Warn("log tail read failed; subscriptions read on their own")
				t.evictAll()
				break
			}
			s.subscriptionReads.Add(1)
			held.observe(s, res.heldBy)
			full := len(res.events) >= s.opts.BatchSize
			t.publish(from, res, full)
			if !full {
				break
			}
		}
		select {
		case <-wake:
		case <-t.kick:
		case <-poll.C:
		case <-s.ctx.Done():
			return
		}
		if wait := time.Until(lastRead.Add(s.opts.TailInterval)); wait > 0 && !pause(s.ctx, wait) {
			return
		}
	}
}

// heldWatch warns when one transaction holds the visibility horizon back for long: it hides
// every newer event from all subscribers, and nothing else would say which one.
type heldWatch struct {
	heldBy    uint64
	heldSince time.Time
	warned    time.Time
}

func (h *heldWatch) observe(s *Store, heldBy uint64) {
	if heldBy != h.heldBy {
		h.heldBy, h.heldSince = heldBy, time.Now()
		return
	}
	if heldBy != 0 && time.Since(h.heldSince) > stuckWarnAfter && time.Since(h.warned) > stuckWarnAfter {
		h.warned = time.Now()
		s.log.WithField("xid", heldBy).WithField("since", h.heldSince).
			Warn("event log visibility held back by a long-running transaction (see pg_stat_activity.backend_xid); subscribers see no newer events until it ends")
	}
}

// live delivers what the tail hands m until m is evicted (the returned cursor is where the
// subscription must read on its own from) or ctx ends.
func (t *tail) live(ctx context.Context, out chan<- eventstore.RecordedEvent, m *tailMember, cursor eventstore.Position,
	scanned func(eventstore.Position)) (eventstore.Position, error) {
	for {
		select {
		case <-m.signal:
		case <-ctx.Done():
			return cursor, ctx.Err()
		}
		batches, evicted := t.take(m)
		for _, b := range batches {
			for _, ev := range b.events {
				if !cursor.Less(ev.Position) {
					continue
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return cursor, ctx.Err()
				}
				cursor = ev.Position
			}
			if cursor.Less(b.to) {
				cursor = b.to
			}
		}
		scanned(cursor)
		if evicted {
			return cursor, nil
		}
	}
}
