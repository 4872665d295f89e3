// Package executor runs component executions (DESIGN.md section 5). Every instance sees every
// submit; an instance claims an attempt by appending ExecutionStarted at the exact revision it
// read, so exactly one wins. The claim carries a lease: when its holder dies, a sweep of the
// read model finds the execution again once the lease has run out, and the stale holder's late
// append fails on revision, so a result is recorded once.
package executor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/feed"
	"github.com/switchyard/switchyard/reactors/livehub"
)

// Options configures an Executor.
type Options struct {
	// Concurrency bounds the module runs of this process (SWITCHYARD_EXECUTOR_CONCURRENCY).
	Concurrency int
	// Worker names this process in claims; default host name and a random suffix.
	Worker string
	// SweepInterval is how often the read model is searched for work the live feed missed
	// (another instance died, a retry is due). Default 2s.
	SweepInterval time.Duration
	// SweepGrace is how long unclaimed work waits for the live path before a sweep takes it.
	// Default 2s.
	SweepGrace time.Duration
	// LeaseMargin is added to a module's deadline to make its lease. Default 10s.
	LeaseMargin time.Duration
	// RetryBackoff is the first wait before a failed attempt is retried; it doubles for each
	// further attempt, with ±20% jitter. Default 200ms.
	RetryBackoff time.Duration
	// DrainTimeout bounds how long Run waits for running modules after ctx ends. Default 30s.
	DrainTimeout time.Duration
	Logger       logrus.FieldLogger
}

// Executor claims and runs executions.
type Executor struct {
	cmds     *commands.Handler
	store    eventstore.Store
	queries  *projections.Queries
	registry *modules.Registry
	hub      *livehub.Hub
	opts     Options
	log      logrus.FieldLogger
	slots    chan struct{}
	charges  *charger

	mu       sync.Mutex
	inflight map[string]bool
	wg       sync.WaitGroup
}

// New returns an executor; Run starts it.
func New(cmds *commands.Handler, queries *projections.Queries, registry *modules.Registry, hub *livehub.Hub, opts Options) *Executor {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 64
	}
	if opts.Worker == "" {
		host, _ := os.Hostname()
		opts.Worker = fmt.Sprintf("%s-%s", host, uuid.NewString()[:8])
	}
	opts.SweepInterval = orDefault(opts.SweepInterval, 2*time.Second)
	opts.SweepGrace = orDefault(opts.SweepGrace, 2*time.Second)
	opts.LeaseMargin = orDefault(opts.LeaseMargin, 10*time.Second)
	opts.RetryBackoff = orDefault(opts.RetryBackoff, 200*time.Millisecond)
	opts.DrainTimeout = orDefault(opts.DrainTimeout, 30*time.Second)
	if opts.Logger == nil {
		opts.Logger = logrus.StandardLogger()
	}
	return &Executor{cmds: cmds, store: cmds.Store(), queries: queries, registry: registry, hub: hub, opts: opts,
		log:   opts.Logger.WithFields(logrus.Fields{"component": "executor", "worker": opts.Worker}),
		slots: make(chan struct{}, opts.Concurrency), charges: newCharger(cmds), inflight: map[string]bool{}}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Run claims work from the live feed of submits and from periodic sweeps until ctx ends, then
// stops claiming and lets running modules finish (up to DrainTimeout).
func (e *Executor) Run(ctx context.Context) error {
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	submits, err := feed.Open(ctx, e.store, eventstore.Filter{Types: []string{execution.Submitted{}.EventType()}}, e.log)
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	sweep := time.NewTicker(e.opts.SweepInterval)
	defer sweep.Stop()
	e.sweep(ctx, runCtx)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case ev, ok := <-submits:
			if ok {
				e.dispatch(ctx, runCtx, ev.Stream[len(execution.Category)+1:])
			}
		case <-sweep.C:
			e.sweep(ctx, runCtx)
		}
	}
	return e.drain(cancelRuns)
}

func (e *Executor) drain(cancelRuns context.CancelFunc) error {
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(e.opts.DrainTimeout):
		cancelRuns()
		<-done
		e.log.Warn("drain timeout: abandoned running executions; their leases let another instance take them over")
		return nil
	}
}

func (e *Executor) sweep(ctx, runCtx context.Context) {
	ids, err := e.queries.ClaimableExecutions(ctx, e.cmds.Now(), e.opts.SweepGrace, 4*e.opts.Concurrency)
	if err != nil {
		if ctx.Err() == nil {
			e.log.WithError(err).Warn("sweep for claimable executions failed")
		}
		return
	}
	for _, id := range ids {
		e.dispatch(ctx, runCtx, id)
	}
}

// dispatch runs id in a slot unless this process works on it already. It blocks while every
// slot is busy, which is the back-pressure on the feed.
func (e *Executor) dispatch(ctx, runCtx context.Context, id string) {
	e.mu.Lock()
	if e.inflight[id] {
		e.mu.Unlock()
		return
	}
	e.inflight[id] = true
	e.mu.Unlock()
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		e.release(id)
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.release(id)
		defer func() { <-e.slots }()
		e.process(ctx, runCtx, id)
	}()
}

func (e *Executor) release(id string) {
	e.mu.Lock()
	delete(e.inflight, id)
	e.mu.Unlock()
}

// process claims id and runs its attempts until it ends, its lease is lost, or the process
// stops claiming (ctx ends; a retry then waits for a sweep of another instance).
func (e *Executor) process(ctx, runCtx context.Context, id string) {
	log := e.log.WithField("executionId", id)
	st, err := e.claim(ctx, id)
	for err == nil {
		if st.CachedFrom != "" {
			if done := e.follow(ctx, runCtx, st); done {
				return
			}
		}
		st, err = e.attempt(runCtx, st)
		if err != nil || st.Status.Terminal() || st.RetryAt.IsZero() {
			break
		}
		if !sleepUntil(ctx, e.cmds.Now(), st.RetryAt) {
			return
		}
		st, err = e.claim(ctx, id)
	}
	switch {
	case err == nil, errors.Is(err, execution.ErrNotClaimable), errors.Is(err, execution.ErrLeaseLost):
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
	default:
		log.WithError(err).Error("execution step failed; a sweep will retry it")
	}
}

func (e *Executor) claim(ctx context.Context, id string) (execution.State, error) {
	return e.cmds.ClaimExecution(ctx, id, e.opts.Worker, e.lease)
}

// lease covers the module's deadline; a cached repeat may wait for its first call's attempts.
func (e *Executor) lease(st execution.State) time.Duration {
	timeout := modules.DefaultTimeout
	if m, ok := e.registry.Get(st.Module); ok {
		timeout = m.Timeout()
	}
	if st.CachedFrom != "" {
		timeout *= time.Duration(execution.MaxAttempts)
	}
	return timeout + e.opts.LeaseMargin
}

// backoff is the wait after failed attempt n: RetryBackoff·2^(n-1), ±20%.
func (e *Executor) backoff(attempt int) time.Duration {
	d := e.opts.RetryBackoff << max(attempt-1, 0)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func sleepUntil(ctx context.Context, now, at time.Time) bool {
	t := time.NewTimer(max(at.Sub(now), 0))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
