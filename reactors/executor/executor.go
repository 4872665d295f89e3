// Package executor runs component executions (DESIGN.md section 5). Every instance sees every
// submit; an instance claims an attempt by appending ExecutionStarted at the exact revision it
// read, so exactly one wins. The claim carries a lease: when its holder dies, a sweep of the
// read model finds the execution again once the lease has run out, and the stale holder's late
// append fails on revision, so a result is recorded once.
package executor

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/configcheck"
	"github.com/switchyard/switchyard/internal/decoded"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/feed"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/seal"
)

// Config configures an Executor.
type Config struct {
	// Concurrency bounds the module runs of this process (SWITCHYARD_EXECUTOR_CONCURRENCY).
	Concurrency int
	// WorkspaceShare is the percentage of Concurrency one workspace may hold at once
	// (SWITCHYARD_EXECUTOR_WORKSPACE_SHARE); the rest waits in the workspace's queue, so that
	// one workspace's backlog leaves slots for the others. Default 50.
	WorkspaceShare int
	// Worker names this process in claims; default host name and a random suffix.
	Worker string
	// SweepInterval is how often the read model is searched for work the live feed missed
	// (another instance died, a retry is due). Default 2s.
	SweepInterval time.Duration
	// SweepGrace is how long unclaimed work waits for the live path before a sweep takes it.
	// Default 2s.
	SweepGrace time.Duration
	// TakeoverGrace is how long an execution another instance accepted (and queued to run
	// itself) stays unclaimed before this one's sweep takes it over. Default 30s.
	TakeoverGrace time.Duration
	// LeaseMargin is added to a module's deadline to make its lease. Default 10s.
	LeaseMargin time.Duration
	// RetryBackoff is the first wait before a failed attempt is retried; it doubles for each
	// further attempt, with ±20% jitter. Default 200ms.
	RetryBackoff time.Duration
	// DrainTimeout bounds how long Run waits for running modules after ctx ends. Default 30s.
	DrainTimeout time.Duration
	// TaskLease is how long a worker's lease of a task (a workspace module's attempt, issue 28)
	// lasts unless a heartbeat renews it. Default 30s.
	TaskLease time.Duration
	// Registerer receives the executor's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Logger receives the executor's warnings; default logrus.StandardLogger().
	Logger logrus.FieldLogger
	// Now is the clock leases, sweeps and retries are timed by; default time.Now.
	Now func() time.Time
	// Sealer opens the secrets HTTP-transport workspace modules sign their tasks with; nil:
	// such a module's attempts fail (transport_http.go).
	Sealer *seal.Sealer
	// ModuleCAs adds trusted CAs for modules' HTTPS URLs (SWITCHYARD_WEBHOOK_CA_FILE's pool);
	// nil: the system roots.
	ModuleCAs *x509.CertPool
}

// Executor claims and runs executions.
type Executor struct {
	cmds     *commands.Commands
	store    eventstore.Store
	queries  *projections.Queries
	registry *modules.Registry
	hub      *livehub.Hub
	opts     Config
	log      logrus.FieldLogger
	slots    *slots
	charges  *charger
	metrics  metrics
	// tasks holds the attempts workers lease (worker_tasks.go).
	tasks *taskBoard
	// transport posts HTTP-transport modules' attempts (transport_http.go).
	transport *httpTransport

	mu       sync.Mutex
	inflight map[string]bool
	waiters  map[string][]chan execution.State
	// ctx and runCtx are Run's: claiming stops when ctx ends, module runs when runCtx does.
	ctx, runCtx context.Context
	taking      atomic.Bool
	wg          sync.WaitGroup
}

// Running reports whether Run is under way and takes this process's submits (commands.Runner).
func (e *Executor) Running() bool { return e.taking.Load() }

// setDefaults fills zero values and repairs out-of-range ones (a negative duration, a share
// above 100) with the default, so that New, which returns no error, always gets a valid Config.
func (c *Config) setDefaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.WorkspaceShare <= 0 || c.WorkspaceShare > 100 {
		c.WorkspaceShare = 50
	}
	if c.Worker == "" {
		host, _ := os.Hostname()
		c.Worker = fmt.Sprintf("%s-%s", host, uuid.NewString()[:8])
	}
	configcheck.SetDefaults(c.durations(), true)
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default.
func (c Config) Validate() error {
	switch {
	case c.Concurrency < 0:
		return fmt.Errorf("executor: Concurrency %d: must be at least 1 (0 takes the default)", c.Concurrency)
	case c.WorkspaceShare < 0 || c.WorkspaceShare > 100:
		return fmt.Errorf("executor: WorkspaceShare %d: must be between 1 and 100 (0 takes the default)", c.WorkspaceShare)
	}
	return configcheck.NotNegative("executor", c.durations())
}

func (c *Config) durations() []configcheck.Duration {
	return []configcheck.Duration{{Name: "SweepInterval", Value: &c.SweepInterval, Default: 2 * time.Second},
		{Name: "SweepGrace", Value: &c.SweepGrace, Default: 2 * time.Second},
		{Name: "TakeoverGrace", Value: &c.TakeoverGrace, Default: 30 * time.Second},
		{Name: "LeaseMargin", Value: &c.LeaseMargin, Default: 10 * time.Second},
		{Name: "RetryBackoff", Value: &c.RetryBackoff, Default: 200 * time.Millisecond},
		{Name: "DrainTimeout", Value: &c.DrainTimeout, Default: 30 * time.Second},
		{Name: "TaskLease", Value: &c.TaskLease, Default: 30 * time.Second}}
}

// New returns an executor following store and issuing cmds' Attempts, Charges and Billing;
// Run starts it. It calls cfg.setDefaults, which repairs what Validate would refuse, so it
// needs no error result. Submits reach it directly once it is their runner
// (commands.WithRunner).
func New(store eventstore.Store, cmds *commands.Commands, queries *projections.Queries, registry *modules.Registry, hub *livehub.Hub, cfg Config) *Executor {
	cfg.setDefaults()
	share := (cfg.Concurrency*cfg.WorkspaceShare + 99) / 100
	m := newMetrics(cfg.Registerer)
	return &Executor{cmds: cmds, store: store, queries: queries, registry: registry, hub: hub, opts: cfg,
		log:   cfg.Logger.WithFields(logrus.Fields{"component": "executor", "worker": cfg.Worker}),
		slots: newSlots(cfg.Concurrency, share), charges: newCharger(cmds, m.rounds), metrics: m,
		transport: newHTTPTransport(cfg.Sealer, cfg.ModuleCAs), tasks: newTaskBoard(),
		inflight: map[string]bool{}, waiters: map[string][]chan execution.State{}}
}

// Worker is the name this executor claims under (commands.Runner).
func (e *Executor) Worker() string { return e.opts.Worker }

// Take queues st, just submitted on this process, to run here (commands.Runner): the submit
// does not come back through the log, and other instances leave it to this one.
func (e *Executor) Take(st execution.State) <-chan execution.State {
	ch := make(chan execution.State, 1)
	e.mu.Lock()
	ctx, runCtx := e.ctx, e.runCtx
	if !st.WorkerTask() {
		e.waiters[st.ID] = append(e.waiters[st.ID], ch)
	}
	e.mu.Unlock()
	if st.WorkerTask() && ctx != nil {
		return e.takeTask(ctx, st) // a worker leases it (worker_tasks.go)
	}
	if ctx == nil {
		e.notify(st.ID, st)
		return ch
	}
	e.dispatch(ctx, runCtx, work{id: st.ID, workspace: st.WorkspaceID, module: st.Module, state: st})
	return ch
}

// Run claims work from this process's submits, the live feed of other submits and periodic
// sweeps until ctx ends, then stops claiming and lets running modules finish (up to
// DrainTimeout).
func (e *Executor) Run(ctx context.Context) error {
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	submits, err := feed.Open(ctx, e.store, eventstore.Filter{Types: []string{execution.Submitted{}.EventType()}}, e.log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped during start-up: a clean stop
		}
		return fmt.Errorf("executor: %w", err)
	}
	if err := e.openTasks(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("executor: %w", err)
	}
	e.mu.Lock()
	e.ctx, e.runCtx = ctx, runCtx
	e.mu.Unlock()
	e.taking.Store(true)
	defer e.taking.Store(false)
	sweep := time.NewTicker(e.opts.SweepInterval)
	defer sweep.Stop()
	e.sweep(ctx, runCtx)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case ev, ok := <-submits:
			if ok {
				e.submitted(ctx, runCtx, ev)
			}
		case <-sweep.C:
			e.sweep(ctx, runCtx)
		}
	}
	e.taking.Store(false)
	return e.drain(cancelRuns)
}

// submitted dispatches a submit from the log that no instance took as its own (a workflow
// stage, or a submit accepted by an instance without an executor).
func (e *Executor) submitted(ctx, runCtx context.Context, ev eventstore.RecordedEvent) {
	d, err := decoded.Event(ev)
	sub, ok := d.(execution.Submitted)
	if err != nil || !ok {
		e.log.WithError(err).WithField("stream", ev.Stream).Warn("cannot decode a submit; a sweep will find it")
		return
	}
	if sub.Runner != "" || (sub.Transport != nil && sub.Transport.Type == execution.TransportWorker) {
		return // its runner has it, or a worker leases it (worker_tasks.go); a sweep takes it over if that instance dies
	}
	e.dispatch(ctx, runCtx, work{id: sub.ExecutionID, workspace: sub.WorkspaceID, module: sub.Module})
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
	ids, err := e.queries.ClaimableExecutions(ctx, e.opts.Now(), e.opts.SweepGrace, 4*e.opts.Concurrency)
	if err != nil {
		if ctx.Err() == nil {
			e.log.WithError(err).Warn("sweep for claimable executions failed")
		}
		return
	}
	for _, id := range ids {
		if e.running(id) || e.pendingTask(id) {
			continue
		}
		st, err := e.cmds.Attempts.Execution(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				e.log.WithError(err).WithField("executionId", id).Warn("sweep cannot read an execution")
			}
			continue
		}
		if st.WorkerTask() {
			e.sweptTask(ctx, st) // a worker leases it (worker_tasks.go)
			continue
		}
		now := e.opts.Now()
		if !st.Claimable(now) || (st.Status == execution.StatusCreated && st.Runner != "" &&
			st.Runner != e.opts.Worker && now.Sub(st.CreatedAt) < e.opts.TakeoverGrace) {
			continue
		}
		e.dispatch(ctx, runCtx, work{id: id, workspace: st.WorkspaceID, module: st.Module})
	}
}

// work is an execution to run and what the slots and the run path need to know of it; state,
// when it exists, is the execution as just submitted.
type work struct {
	id, workspace, module string
	state                 execution.State
}

// dispatch queues w for a slot in its workspace's turn unless this process works on it
// already.
func (e *Executor) dispatch(ctx, runCtx context.Context, w work) {
	e.mu.Lock()
	if e.inflight[w.id] {
		e.mu.Unlock()
		return
	}
	e.inflight[w.id] = true
	e.wg.Add(1)
	e.mu.Unlock()
	e.metrics.queued.Inc()
	e.slots.submit(w.workspace, func() {
		defer e.wg.Done()
		e.metrics.queued.Dec()
		st := e.process(ctx, runCtx, w)
		if !e.retryLater(ctx, runCtx, w, st) {
			e.release(w.id, st)
		}
	})
}

// retryLater hands the slot back while st waits for its retry, and dispatches the execution
// again when the retry is due: a waiting retry holds no slot. The execution stays in flight
// here meanwhile, so this process's sweep leaves it to the timer, and its waiters wait on.
// The due time is in the log (ExecutionAttemptFailed.retryAt), so when this process stops
// first, the sweep of any instance finds the retry once it is due. It reports false when st
// does not wait for a retry.
func (e *Executor) retryLater(ctx, runCtx context.Context, w work, st execution.State) bool {
	if ctx.Err() != nil || !st.Exists || st.Status.Terminal() || st.RetryAt.IsZero() {
		return false
	}
	time.AfterFunc(max(st.RetryAt.Sub(e.opts.Now()), 0), func() {
		e.mu.Lock()
		delete(e.inflight, w.id)
		e.mu.Unlock()
		if ctx.Err() != nil {
			e.notify(w.id, st)
			return
		}
		e.dispatch(ctx, runCtx, work{id: w.id, workspace: w.workspace, module: w.module})
	})
	return true
}

func (e *Executor) running(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inflight[id]
}

// release ends this process's work on id and hands st to whoever waits for it.
func (e *Executor) release(id string, st execution.State) {
	e.mu.Lock()
	delete(e.inflight, id)
	e.mu.Unlock()
	e.notify(id, st)
}

func (e *Executor) notify(id string, st execution.State) {
	e.mu.Lock()
	chs := e.waiters[id]
	delete(e.waiters, id)
	e.mu.Unlock()
	for _, ch := range chs {
		ch <- st
	}
}

// process runs w's attempts until it ends, its lease is lost, an attempt failed and waits
// for its retry (retryLater), or the process stops claiming (ctx ends). It returns the state
// last recorded (zero when none was).
func (e *Executor) process(ctx, runCtx context.Context, w work) execution.State {
	log := e.log.WithField("executionId", w.id)
	var st execution.State
	var err error
	if m, ok := e.registry.Get(w.module); ok && modules.IsRepeatable(m) {
		st, err = e.runUnclaimed(ctx, runCtx, w)
	} else {
		st, err = e.claim(ctx, w.id)
	}
	for err == nil && !st.Status.Terminal() {
		if st.Status == execution.StatusRunning && st.Worker == e.opts.Worker && st.RetryAt.IsZero() {
			if st.CachedFrom != "" {
				if next, done := e.follow(ctx, runCtx, st); done {
					return next
				}
			}
			st, err = e.attempt(runCtx, st)
			continue
		}
		break
	}
	switch {
	case err == nil, errors.Is(err, execution.ErrLeaseLost):
	case errors.Is(err, execution.ErrNotClaimable):
		e.metrics.lost.Inc()
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
	default:
		log.WithError(err).Error("execution step failed; a sweep will retry it")
	}
	return st
}

func (e *Executor) claim(ctx context.Context, id string) (execution.State, error) {
	e.metrics.claims.Inc()
	return e.cmds.Attempts.ClaimExecution(ctx, id, e.opts.Worker, e.lease)
}

// lease covers the module's deadline; a cached repeat may wait for its first call's attempts.
func (e *Executor) lease(st execution.State) time.Duration {
	timeout := modules.DefaultTimeout
	if m, ok := e.registry.Get(st.Module); ok {
		timeout = m.Timeout()
	} else if st.Transport != nil && st.TimeoutMs > 0 {
		timeout = time.Duration(st.TimeoutMs) * time.Millisecond // a workspace module's own deadline
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
