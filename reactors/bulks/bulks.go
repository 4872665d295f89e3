// Package bulks carries out bulk actions on runs (docs/workflows.md, "Bulk actions"): it
// advances each bulk a batch at a time (commands.Bulks.AdvanceBulk) until it is COMPLETED.
//
// One instance works at a time (a PostgreSQL advisory lock); the others wait to take over.
// A new holder resumes every bulk the bulks read model shows unfinished, and a periodic sweep
// resumes one whose batch failed, so a crash mid-bulk loses nothing. A run is acted on once:
// the bulk's stream marks each run, and a batch acted on but not marked before a crash is
// found done when acted on again (commands/bulk.go).
package bulks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/bulk"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/feed"
)

// LockFunc runs fn while this process holds the bulks' lock (projections.HoldLock).
type LockFunc = feed.LockFunc

// Config configures a Worker.
type Config struct {
	// Lock elects the one working instance; nil (the default) works without one, for a single
	// process.
	Lock LockFunc
	// SweepInterval is how often bulks not completed are resumed. Default 2s.
	SweepInterval time.Duration
	// Concurrency bounds the batches of bulks acted on at once. Default 4.
	Concurrency int
	// Logger receives the worker's warnings; default logrus.StandardLogger().
	Logger logrus.FieldLogger
}

func (c *Config) setDefaults() {
	if c.SweepInterval <= 0 {
		c.SweepInterval = 2 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.Lock == nil {
		c.Lock = feed.NoLock
	}
}

// Validate reports the first field out of range, by name. Zero values take the default.
func (c Config) Validate() error {
	switch {
	case c.SweepInterval < 0:
		return fmt.Errorf("bulks: SweepInterval %v: must not be negative", c.SweepInterval)
	case c.Concurrency < 0:
		return fmt.Errorf("bulks: Concurrency %d: must be at least 1 (0 takes the default)", c.Concurrency)
	}
	return nil
}

// Worker advances bulks.
type Worker struct {
	store   eventstore.Store
	cmds    *commands.Commands
	queries *projections.Queries
	opts    Config
	log     logrus.FieldLogger
	slots   chan struct{}

	mu   sync.Mutex
	busy map[string]bool
	wg   sync.WaitGroup
}

// New returns a worker following store and issuing cmds' Bulks; Run starts it. It calls
// cfg.setDefaults, which repairs what Validate would refuse.
func New(store eventstore.Store, cmds *commands.Commands, queries *projections.Queries, cfg Config) *Worker {
	cfg.setDefaults()
	return &Worker{store: store, cmds: cmds, queries: queries, opts: cfg, log: cfg.Logger.WithField("component", "bulks"),
		slots: make(chan struct{}, cfg.Concurrency), busy: map[string]bool{}}
}

// Run works while it holds the lock, waiting for it again if it loses it, until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	feed.Lead(ctx, w.opts.Lock, w.lead, w.log, "bulks")
	w.wg.Wait()
	return nil
}

var filter = eventstore.Filter{Types: []string{bulk.Requested{}.EventType()}}

// lead follows new bulks on the live feed and sweeps the unfinished ones until ctx ends.
func (w *Worker) lead(ctx context.Context) error {
	events, err := feed.Open(ctx, w.store, filter, w.log)
	if err != nil {
		return err
	}
	w.sweep(ctx)
	t := time.NewTicker(w.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			w.start(ctx, ev.Stream[strings.IndexByte(ev.Stream, '-')+1:])
		case <-t.C:
			w.sweep(ctx)
		}
	}
}

// sweep resumes the bulks the read model shows unfinished.
func (w *Worker) sweep(ctx context.Context) {
	ids, err := w.queries.UnfinishedBulks(ctx, 4*w.opts.Concurrency)
	if err != nil {
		if ctx.Err() == nil {
			w.log.WithError(err).Warn("sweep for unfinished bulks failed")
		}
		return
	}
	for _, id := range ids {
		w.start(ctx, id)
	}
}

// start advances bulk id in the background unless it is being advanced already.
func (w *Worker) start(ctx context.Context, id string) {
	w.mu.Lock()
	if w.busy[id] {
		w.mu.Unlock()
		return
	}
	w.busy[id] = true
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.done(id)
		w.advance(ctx, id)
	}()
}

func (w *Worker) done(id string) {
	w.mu.Lock()
	delete(w.busy, id)
	w.mu.Unlock()
}

// advance carries bulk id out a batch at a time until it is COMPLETED; an error leaves the
// rest to the next sweep. Each batch takes a slot and gives it back: blocked senders on a
// channel are served in order, so bulks waiting for a slot take turns batch by batch, and one
// workspace's large bulks do not hold another's back until they end.
func (w *Worker) advance(ctx context.Context, id string) {
	for {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		st, err := w.cmds.Bulks.AdvanceBulk(ctx, id)
		<-w.slots
		if err != nil {
			if ctx.Err() == nil {
				w.log.WithField("bulkId", id).WithError(err).Warn("bulk batch failed; a sweep will resume it")
			}
			return
		}
		if st.Status == bulk.StatusCompleted || len(st.Next(1)) == 0 {
			return
		}
	}
}
