// Package debounce starts the runs of debounced triggers' windows when they fall due
// (docs/workflows.md, "Debounce"): a window is due once its key has been quiet for quietMs, or
// maxWaitMs after its first delivery (a window that reaches maxItems is flushed by the
// delivery that fills it; this reactor is its backstop).
//
// One instance leads at a time (a PostgreSQL advisory lock). The leader arms a timer for the
// nearest due window: windows it learns of from the live log, and on taking the lead and
// every SweepInterval from the debouncewindows read model, so a restart or a new leader
// rebuilds its timers from the log's record. A flush is exactly once whoever does it and
// however often: the window closes by an append at the revision read, and its run's id
// derives from the window (commands.Events.FlushDebounce).
package debounce

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	domaindebounce "github.com/switchyard/switchyard/domain/debounce"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/feed"
)

// Config configures a Reactor.
type Config struct {
	// Lock elects the leading instance; nil (the default) leads without one, for a single
	// process.
	Lock feed.LockFunc
	// Now is the clock windows fall due by; default time.Now. It must be the commands' clock.
	Now func() time.Time
	// After waits for a duration on the same clock as Now; default time.After.
	After func(time.Duration) <-chan time.Time
	// SweepInterval is how often pending windows are read again from the read model (windows
	// the live log did not show this instance: buffered before it led). Default 5s.
	SweepInterval time.Duration
	// RetryDelay is how long a window whose flush failed (the database, a start refused for
	// now) waits before it is tried again. Default 1s.
	RetryDelay time.Duration
	// SweepLimit bounds the windows read per sweep, soonest due first. Default 10000.
	SweepLimit int
	// Logger receives the reactor's warnings; default logrus.StandardLogger().
	Logger logrus.FieldLogger
}

func (c *Config) setDefaults() {
	if c.Lock == nil {
		c.Lock = feed.NoLock
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.After == nil {
		c.After = time.After
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 5 * time.Second
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	if c.SweepLimit <= 0 {
		c.SweepLimit = 10000
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
}

// Validate reports the first field out of range, by name. Zero values take the default.
func (c Config) Validate() error {
	switch {
	case c.SweepInterval < 0:
		return fmt.Errorf("debounce: SweepInterval %v: must not be negative", c.SweepInterval)
	case c.RetryDelay < 0:
		return fmt.Errorf("debounce: RetryDelay %v: must not be negative", c.RetryDelay)
	case c.SweepLimit < 0:
		return fmt.Errorf("debounce: SweepLimit %d: must not be negative", c.SweepLimit)
	}
	return nil
}

// Reactor flushes debounce windows when they fall due.
type Reactor struct {
	store   eventstore.Store
	cmds    *commands.Commands
	queries *projections.Queries
	opts    Config
	log     logrus.FieldLogger
}

// New returns a reactor following store and flushing through cmds' Events; Run starts it. It
// calls cfg.setDefaults, which repairs what Validate would refuse.
func New(store eventstore.Store, cmds *commands.Commands, queries *projections.Queries, cfg Config) *Reactor {
	cfg.setDefaults()
	return &Reactor{store: store, cmds: cmds, queries: queries, opts: cfg, log: cfg.Logger.WithField("component", "debounce")}
}

// Run leads while it holds the lock, waiting for it again if it loses it, until ctx ends.
func (r *Reactor) Run(ctx context.Context) error {
	feed.Lead(ctx, r.opts.Lock, r.lead, r.log, "debounce")
	return nil
}

var filter = eventstore.Filter{Types: []string{domaindebounce.Buffered{}.EventType()}}

// lead keeps a timer on the nearest due window until ctx ends.
func (r *Reactor) lead(ctx context.Context) error {
	events, err := feed.Open(ctx, r.store, filter, r.log)
	if err != nil {
		return err
	}
	due := newTimers()
	if err := r.sweep(ctx, due); err != nil {
		return err
	}
	sweep := r.opts.After(r.opts.SweepInterval)
	var fire <-chan time.Time
	var armed time.Time // when fire fires; zero: not armed
	for {
		// A new wait only when the nearest due time moved: the feed wakes this loop for
		// every delivery, and most do not change it.
		if at, ok := due.next(); !ok {
			fire, armed = nil, time.Time{}
		} else if !at.Equal(armed) {
			fire, armed = r.opts.After(max(at.Sub(r.opts.Now()), 0)), at
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			r.learn(due, ev)
		case <-sweep:
			if err := r.sweep(ctx, due); err != nil && ctx.Err() == nil {
				r.log.WithError(err).Warn("debounce sweep failed")
			}
			sweep = r.opts.After(r.opts.SweepInterval)
		case <-fire:
			fire, armed = nil, time.Time{}
			r.flushDue(ctx, due)
		}
	}
}

// learn arms a window buffered on the live log. A window's first delivery tells its due time;
// a later one can only move it later (the quiet period starts again), so a window already armed
// keeps its time, and its flush finds out the new one.
func (r *Reactor) learn(due *timers, ev eventstore.RecordedEvent) {
	if due.has(ev.Stream) {
		return
	}
	b, err := decodeBuffered(ev)
	if err != nil || b.Config == nil {
		due.set(ev.Stream, r.opts.Now()) // a window first seen mid-way: look at it now
		return
	}
	due.set(ev.Stream, b.At.Add(time.Duration(min(b.Config.QuietMs, b.Config.MaxWaitMs))*time.Millisecond))
}

// sweep arms every pending window of the read model.
func (r *Reactor) sweep(ctx context.Context, due *timers) error {
	pending, err := r.queries.PendingDebounceWindows(ctx, r.opts.SweepLimit)
	if err != nil {
		return err
	}
	for _, w := range pending {
		if at, armed := due.at[w.Stream]; !armed || w.DueAt.Before(at) {
			due.set(w.Stream, w.DueAt)
		}
	}
	return nil
}

// flushDue flushes the windows due by now, re-arming those a later delivery moved on and
// those whose flush failed.
func (r *Reactor) flushDue(ctx context.Context, due *timers) {
	now := r.opts.Now()
	for _, stream := range due.popDue(now) {
		next, err := r.cmds.Events.FlushDebounce(ctx, stream)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			r.log.WithError(err).WithField("stream", stream).Warn("debounce flush failed; trying again")
			due.set(stream, now.Add(r.opts.RetryDelay))
		case next.IsZero():
		case next.After(now):
			due.set(stream, next)
		default: // due but not flushed: a start refused for now waits its turn
			due.set(stream, now.Add(r.opts.RetryDelay))
		}
	}
}

// timers holds each pending window's due time, by stream, with a heap to find the soonest:
// an entry of the heap whose time is no longer its stream's is stale and skipped.
type timers struct {
	at   map[string]time.Time
	heap timerHeap
}

func newTimers() *timers { return &timers{at: map[string]time.Time{}} }

func (t *timers) has(stream string) bool { _, ok := t.at[stream]; return ok }

func (t *timers) set(stream string, at time.Time) {
	t.at[stream] = at
	heap.Push(&t.heap, timer{stream: stream, at: at})
}

// next is the soonest due time.
func (t *timers) next() (time.Time, bool) {
	for t.heap.Len() > 0 {
		top := t.heap[0]
		if at, ok := t.at[top.stream]; ok && at.Equal(top.at) {
			return top.at, true
		}
		heap.Pop(&t.heap) // stale
	}
	return time.Time{}, false
}

// popDue removes and lists the windows due by now.
func (t *timers) popDue(now time.Time) []string {
	var out []string
	for {
		at, ok := t.next()
		if !ok || at.After(now) {
			return out
		}
		top := heap.Pop(&t.heap).(timer)
		delete(t.at, top.stream)
		out = append(out, top.stream)
	}
}

type timer struct {
	stream string
	at     time.Time
}

// timerHeap is a min-heap of timers by time (container/heap).
type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func decodeBuffered(ev eventstore.RecordedEvent) (domaindebounce.Buffered, error) {
	e, err := domain.Events.Decode(ev.Type, ev.Data)
	if err != nil {
		return domaindebounce.Buffered{}, err
	}
	b, ok := e.(domaindebounce.Buffered)
	if !ok {
		return b, fmt.Errorf("debounce: %s is not a %s", ev.Type, b.EventType())
	}
	return b, nil
}
