// Package windows keeps each instance's cache windows current with the others': it follows
// the windows the log brings (CacheWindowOpened) into the process's state cache
// (commands.Windows.Learn). An identical call that reaches an instance after another
// instance opened its window is then known free there, as it is where the window opened.
// Without it, that instance guessed the window not open, ran the call, had its charge batch
// refused on the window and read its windows before answering the call free: with two
// instances, half the repeats of a call took that path, and two instances answered repeats at
// about a third of one's speed (docs/performance.md, "Cache windows").
//
// Every instance runs one; it needs no lock. What it learns is only ever a state the stream had
// (a window's state is its last opening), so a late or missed event costs speed, never
// correctness: a window not learned is found as before, by the refused commit.
package windows

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/feed"
)

// Config configures a Follower.
type Config struct {
	// Logger receives the follower's warnings; default logrus.StandardLogger().
	Logger logrus.FieldLogger
	// Registerer, when set, gets switchyard_cache_windows_learned_total.
	Registerer prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
}

// Follower follows the log's cache windows into one process's commands.
type Follower struct {
	store   eventstore.Store
	cmds    *commands.Commands
	log     logrus.FieldLogger
	learned prometheus.Counter
}

// New returns a follower of store's windows for cmds; Start starts it.
func New(store eventstore.Store, cmds *commands.Commands, cfg Config) *Follower {
	cfg.setDefaults()
	learned := prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_cache_windows_learned_total",
		Help: "Cache windows this process learned from the log (each instance learns every window opened, its own included)."})
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(learned)
	}
	return &Follower{store: store, cmds: cmds, log: cfg.Logger.WithField("component", "windows"), learned: learned}
}

var filter = eventstore.Filter{Types: []string{execution.CacheWindowOpened{}.EventType()}}

// Start subscribes to the log and follows it in the background until ctx ends: every window
// opened after Start returns is learned. (Windows opened before are found by the first call
// that needs them, by the refused commit.)
func (f *Follower) Start(ctx context.Context) error {
	events, err := feed.Open(ctx, f.store, filter, f.log)
	if err != nil {
		return fmt.Errorf("windows: %w", err)
	}
	go f.follow(events)
	return nil
}

func (f *Follower) follow(events <-chan eventstore.RecordedEvent) {
	for rec := range events {
		if err := f.cmds.Windows.Learn(rec); err != nil {
			f.log.WithError(err).WithField("stream", rec.Stream).Warn("cache window not learned")
			continue
		}
		f.learned.Inc()
	}
}
