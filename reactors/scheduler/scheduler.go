// Package scheduler advances workflow runs (DESIGN.md section 5). It reads run triggers and
// the executions of run stages from the event log, records each stage's progress on its run,
// dispatches the stages whose upstream completed and submits their executions, which the
// executor runs like any other.
//
// One instance schedules at a time (a Postgres advisory lock); the others wait to take over.
// Everything it does is derived from the log: a new holder reconciles every unfinished run with
// its stage executions, so a crash anywhere loses nothing. A stage runs at most once to
// completion because its execution's id is derived from the stage: submitting it again is a
// no-op, and the executor records one result per execution.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/decoded"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/feed"
)

// LockFunc runs fn while this process holds the scheduler's lock (projections.HoldLock).
type LockFunc = feed.LockFunc

// Config configures a Scheduler.
type Config struct {
	// Lock elects the one scheduling instance; nil (the default) schedules without one, for a
	// single process.
	Lock LockFunc
	// SweepInterval is how often runs that stopped moving are reconciled. Default 2s.
	SweepInterval time.Duration
	// SweepGrace is how long a run must be still before a sweep looks at it. Default 5s.
	SweepGrace time.Duration
	// Concurrency bounds the runs stepped at once. Default 32.
	Concurrency int
	// Logger receives the scheduler's warnings; default logrus.StandardLogger().
	Logger logrus.FieldLogger
	// Now is the clock sweeps are timed by; default time.Now.
	Now func() time.Time
	// Runner is this process's executor, when one runs here (commands.Runner): the stages of
	// repeatable modules then run in it at once (TryRunFirst), their submit, outcome and charge
	// in one commit, and their outcome goes straight into the run's next step instead of
	// coming back through the log. nil, or a stage it does not take, submits through the log,
	// for any instance's executor. Either way the log is what the run's facts are rebuilt from.
	Runner commands.Runner
	// WaitPoll is how often the lead loads the waits due soon from the read model (run_waits);
	// WaitHorizon how far ahead it looks; WaitBatch the most it holds at once. Defaults 1s, 5s
	// and 20,000 (waits.go).
	WaitPoll    time.Duration
	WaitHorizon time.Duration
	WaitBatch   int
	// Ended, when set, is told of each run a step ended, once its end is written: serve has
	// the live hub wake the run's streams with it, ahead of the log's tail. (Its other steps
	// reach the streams through the log: a notice each would cost every stream a read.)
	Ended func(runID string)
}

// Scheduler advances runs.
type Scheduler struct {
	store   eventstore.Store
	cmds    *commands.Commands
	queries *projections.Queries
	opts    Config
	log     logrus.FieldLogger
	slots   chan struct{}

	mu     sync.Mutex
	queued map[string][]run.Fact // runs with something to do, and the facts to record
	busy   map[string]bool
	// deadlines are the runs whose timeout timer is armed in this process (armDeadline).
	deadlines map[string]bool
	// leadCtx is the context of the current lead, nil while this instance does not schedule
	// (Wake needs both).
	leadCtx context.Context
	// woken are the runs Wake started ahead of their trigger's arrival from the log, and
	// settled the stage executions whose outcome a step took from the runner ahead of the
	// log's: their events from the log are then dropped instead of stepping the run again
	// for nothing (take).
	woken   map[string]bool
	settled map[string]bool
	// running holds, by execution, the facts the log brought about a stage execution while
	// the runner had it (start): its charge commit, when the runner answers, may have stepped
	// the run with them already. They are dropped if it has, and stepped if not.
	running map[string][]run.Fact
	// early are the runs woken while this instance did not schedule, stepped when it starts.
	early map[string]bool
	// started holds the runs Wake was given, as their trigger's commit left them, until their
	// worker starts the stages that commit dispatched; fresh the runs whose trigger came
	// from the log (or early), whose first step starts the stages their trigger's commit
	// dispatched and left CREATED (startCreated).
	started map[string]wokenRun
	fresh   map[string]bool
	// fromLog are the runs whose trigger the log brought before Wake did, and which that
	// started: the Wake that follows is dropped instead of starting their stages again.
	fromLog map[string]bool
	// queueEnded holds, by concurrency queue, the ended runs its next settle frees; queueBusy
	// the queues being settled (queues.go).
	queueEnded map[string][]string
	queueBusy  map[string]bool
	// waitQueue holds the waits due within the horizon, soonest first; armed its keys; fired
	// the waits fired lately (waits.go); rearm tells watchWaits of a new soonest.
	waitQueue waitHeap
	armed     map[dueWait]bool
	fired     map[dueWait]time.Time
	rearm     chan struct{}
	// prefetching is set while the runs of armed waits are read ahead (loadWaits).
	prefetching atomic.Bool
	wg          sync.WaitGroup
}

// setDefaults fills zero values and repairs negative ones with the default, so that New,
// which returns no error, always gets a valid Config.
func (c *Config) setDefaults() {
	if c.SweepInterval <= 0 {
		c.SweepInterval = 2 * time.Second
	}
	if c.SweepGrace <= 0 {
		c.SweepGrace = 5 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 32
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Lock == nil {
		c.Lock = feed.NoLock
	}
	if c.WaitPoll <= 0 {
		c.WaitPoll = time.Second
	}
	if c.WaitHorizon <= c.WaitPoll {
		c.WaitHorizon = max(5*time.Second, 2*c.WaitPoll)
	}
	if c.WaitBatch <= 0 {
		c.WaitBatch = 20_000
	}
}

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default.
func (c Config) Validate() error {
	switch {
	case c.SweepInterval < 0:
		return fmt.Errorf("scheduler: SweepInterval %v: must not be negative", c.SweepInterval)
	case c.SweepGrace < 0:
		return fmt.Errorf("scheduler: SweepGrace %v: must not be negative", c.SweepGrace)
	case c.Concurrency < 0:
		return fmt.Errorf("scheduler: Concurrency %d: must be at least 1 (0 takes the default)", c.Concurrency)
	case c.WaitPoll < 0:
		return fmt.Errorf("scheduler: WaitPoll %v: must not be negative", c.WaitPoll)
	case c.WaitHorizon < 0:
		return fmt.Errorf("scheduler: WaitHorizon %v: must not be negative", c.WaitHorizon)
	case c.WaitBatch < 0:
		return fmt.Errorf("scheduler: WaitBatch %d: must be at least 1 (0 takes the default)", c.WaitBatch)
	}
	return nil
}

// New returns a scheduler following store and issuing cmds' Workflows; Run starts it. It
// calls cfg.setDefaults, which repairs what Validate would refuse, so it needs no error result.
func New(store eventstore.Store, cmds *commands.Commands, queries *projections.Queries, cfg Config) *Scheduler {
	cfg.setDefaults()
	return &Scheduler{store: store, cmds: cmds, queries: queries, opts: cfg, log: cfg.Logger.WithField("component", "scheduler"),
		slots: make(chan struct{}, cfg.Concurrency), queued: map[string][]run.Fact{}, busy: map[string]bool{},
		deadlines: map[string]bool{}, woken: map[string]bool{}, settled: map[string]bool{}, running: map[string][]run.Fact{},
		early: map[string]bool{}, started: map[string]wokenRun{}, fresh: map[string]bool{}, fromLog: map[string]bool{}, queueEnded: map[string][]string{}, queueBusy: map[string]bool{},
		armed: map[dueWait]bool{}, fired: map[dueWait]time.Time{}, rearm: make(chan struct{}, 1)}
}

// wokenRun is a run as its trigger's commit left it and the stages that commit dispatched.
type wokenRun struct {
	st         run.State
	dispatched []run.Stage
}

// Wake starts a run this process has just triggered (commands.WithRunWaker) at once, instead
// of when the log brings its trigger: st is the run as the trigger's commit left it, which
// dispatched the stages in dispatched (commands' firstStep), started by the run's worker
// without a read. While this instance does not schedule, the run is kept for when it starts
// to: a trigger written just before the scheduler's feed opened is in neither the feed nor,
// while the projections catch up, the first sweep. The instance that schedules meanwhile
// learns of the run from the log, as it does of every other.
func (s *Scheduler) Wake(st run.State, dispatched []run.Stage) {
	s.mu.Lock()
	ctx := s.leadCtx
	if ctx == nil {
		if len(s.early) >= maxEarly {
			clear(s.early) // an instance that does not schedule: the one that does has them
		}
		s.early[st.ID] = true
	} else if s.fromLog[st.ID] {
		delete(s.fromLog, st.ID) // the log's trigger came first and started it
		ctx = nil
	} else {
		remember(s.woken, st.ID)
		s.started[st.ID] = wokenRun{st: st, dispatched: dispatched}
		s.rememberEnded(nil, &st, "") // ended in the trigger's commit (commands' triggerFirst)
	}
	s.mu.Unlock()
	if ctx != nil {
		s.enqueue(ctx, st.ID)
	}
}

// Run schedules while it holds the lock, waiting for it again if it loses it, until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	feed.Lead(ctx, s.opts.Lock, s.lead, s.log, "scheduler")
	s.wg.Wait()
	return nil
}

// filter selects what moves runs: triggers, the execution events of stages, and the ends of
// runs (a child's end moves its parent; a parent's end cancels its children).
var filter = eventstore.Filter{Types: []string{run.Triggered{}.EventType(), execution.Started{}.EventType(),
	execution.Completed{}.EventType(), execution.Failed{}.EventType(), run.Finished{}.EventType()}}

// lead schedules until ctx ends: the live feed first, then a sweep of every unfinished run,
// so nothing that happened before this process took over is missed.
func (s *Scheduler) lead(ctx context.Context) error {
	events, err := feed.Open(ctx, s.store, filter, s.log)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	s.log.Info("scheduler running")
	s.mu.Lock()
	s.leadCtx = ctx
	early := s.early
	s.early = map[string]bool{}
	for id := range early {
		remember(s.woken, id) // their fresh step below starts them: the feed's trigger is dropped
	}
	s.mu.Unlock()
	for id := range early {
		s.enqueueFresh(ctx, id)
	}
	defer func() {
		s.mu.Lock()
		s.leadCtx = nil
		clear(s.woken)
		clear(s.settled)
		clear(s.started)
		clear(s.fresh)
		clear(s.fromLog)
		s.mu.Unlock()
	}()
	s.background(ctx, func() { s.watchWaits(ctx) })
	s.awaitTriggersProjected(ctx)
	s.sweep(ctx, s.opts.Now().Add(time.Hour))
	s.settleWaiting(ctx)
	tick := time.NewTicker(s.opts.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return ctx.Err()
			}
			s.take(ctx, ev)
		case <-tick.C:
			s.sweep(ctx, s.opts.Now().Add(-s.opts.SweepGrace))
			s.settleWaiting(ctx)
		}
	}
}

// take turns a logged event into work on its run. The event is decoded once per process
// (decoded.Event): the projectors take the same records at about the same time.
func (s *Scheduler) take(ctx context.Context, rec eventstore.RecordedEvent) {
	ev, err := decoded.Event(rec)
	if err != nil {
		s.log.WithError(err).Warn("undecodable event skipped")
		return
	}
	switch e := ev.(type) {
	case run.Triggered:
		if e.Definition.TimeoutMs > 0 {
			s.armDeadline(ctx, e.RunID, e.At.Add(time.Duration(e.Definition.TimeoutMs)*time.Millisecond))
		}
		if j, queued := run.JoinQueue(e); queued {
			s.seen(s.woken, e.RunID, true)
			s.settle(ctx, j.QueueID) // nothing of it moves until its queue admits it
		} else if s.firstFromLog(e.RunID) {
			s.enqueueFresh(ctx, e.RunID)
		}
		if e.ParentRunID != "" {
			s.background(ctx, func() { s.childStarted(ctx, e.RunID) })
		}
	case run.Finished:
		if e.QueueID != "" {
			s.settle(ctx, e.QueueID, e.RunID)
		}
		s.background(ctx, func() { s.runEnded(ctx, e.RunID, rec.Revision) })
	case execution.Started:
		s.takeFact(ctx, e.RunID, run.Fact{ExecutionID: e.ExecutionID, Kind: run.FactStarted, Attempt: e.Attempt, At: e.At}, false)
	case execution.Completed:
		s.takeFact(ctx, e.RunID, run.Fact{ExecutionID: e.ExecutionID, Kind: run.FactCompleted, Attempt: e.Attempt,
			Output: e.Output, Usage: e.TotalUsage, At: e.At}, true)
	case execution.Failed:
		s.takeFact(ctx, e.RunID, run.Fact{ExecutionID: e.ExecutionID, Kind: run.FactFailed, Attempt: e.Attempt, Error: e.Error, At: e.At}, true)
	}
}

// takeFact steps runID with a fact the log brought about one of its stage executions, unless
// a step took it from the runner already (settled; last forgets the execution), or the runner
// has the execution still (running): the fact then waits for the runner's answer (runFirst).
func (s *Scheduler) takeFact(ctx context.Context, runID string, f run.Fact, last bool) {
	if runID == "" {
		return
	}
	s.mu.Lock()
	if held, ok := s.running[f.ExecutionID]; ok {
		s.running[f.ExecutionID] = append(held, f)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if !s.seen(s.settled, f.ExecutionID, last) {
		s.enqueue(ctx, runID, f)
	}
}

// seen reports whether id is in set (woken or settled): what the log brings about it was
// taken already. last forgets it: nothing more about it will come.
func (s *Scheduler) seen(set map[string]bool, id string, last bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := set[id]
	if ok && last {
		delete(set, id)
	}
	return ok
}

// maxRemembered bounds woken and settled. An entry whose event the log brought first stays
// until the lead ends; forgetting them all costs a step that records nothing per entry.
const maxRemembered = 100_000

// maxEarly bounds the runs kept while this instance does not schedule (Wake): they matter
// only when it has just started and is about to.
const maxEarly = 1000

func remember(set map[string]bool, id string) {
	if len(set) >= maxRemembered {
		clear(set)
	}
	set[id] = true
}

// armDeadline steps the run when its timeout comes, so that it ends then (run_timeout) even
// while no stage moves it. The deadline is the run's trigger time plus its definition's
// timeoutMs, both in the log: a scheduler that takes over arms it again when its first sweep
// reconciles the run, and every step at or after it ends the run, so none is missed.
func (s *Scheduler) armDeadline(ctx context.Context, runID string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deadlines[runID] {
		return
	}
	s.deadlines[runID] = true
	time.AfterFunc(max(at.Sub(s.opts.Now()), 0), func() {
		s.mu.Lock()
		delete(s.deadlines, runID)
		s.mu.Unlock()
		if ctx.Err() == nil {
			s.enqueue(ctx, runID)
		}
	})
}

// enqueue adds facts for a run and makes sure a worker steps it. Facts that arrive while a
// step is running are taken by the worker's next step, in one append.
func (s *Scheduler) enqueue(ctx context.Context, runID string, facts ...run.Fact) {
	s.mu.Lock()
	s.queued[runID] = append(s.queued[runID], facts...)
	if s.queued[runID] == nil {
		s.queued[runID] = []run.Fact{}
	}
	if s.busy[runID] {
		s.mu.Unlock()
		return
	}
	s.busy[runID] = true
	s.mu.Unlock()
	s.wg.Add(1)
	go s.work(ctx, runID)
}

// firstFromLog reports whether the log brings the trigger of run id before Wake, remembering
// it so that the Wake that may follow is dropped; false when Wake came first (and started it).
func (s *Scheduler) firstFromLog(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.woken[id] {
		delete(s.woken, id)
		return false
	}
	remember(s.fromLog, id)
	return true
}

// enqueueFresh is enqueue of a run whose trigger this instance has not started: its next step
// also starts the stages its trigger's commit dispatched.
func (s *Scheduler) enqueueFresh(ctx context.Context, runID string) {
	s.mu.Lock()
	s.fresh[runID] = true
	s.mu.Unlock()
	s.enqueue(ctx, runID)
}

func (s *Scheduler) work(ctx context.Context, runID string) {
	defer s.wg.Done()
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.busy, runID)
		s.mu.Unlock()
		return
	}
	defer func() { <-s.slots }()
	for {
		s.mu.Lock()
		facts, ok := s.queued[runID]
		delete(s.queued, runID)
		woken, isWoken := s.started[runID]
		delete(s.started, runID)
		fresh := s.fresh[runID]
		delete(s.fresh, runID)
		if !ok || ctx.Err() != nil {
			delete(s.busy, runID)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if isWoken {
			// Written and dispatched in the trigger's commit: nothing to step, nothing to read.
			s.stepped(ctx, &woken.st, woken.dispatched)
			if len(facts) == 0 {
				continue
			}
		}
		s.step(ctx, runID, facts, fresh)
	}
}

// step records facts on the run, advances it and submits the executions of the stages it
// dispatched, and, for a fresh run (enqueueFresh), those its trigger's commit dispatched. A
// failure is logged and left to the sweep, which rebuilds the facts from the executions
// themselves.
func (s *Scheduler) step(ctx context.Context, runID string, facts []run.Fact, fresh bool) {
	log := s.log.WithField("runId", runID)
	st, dispatched, err := s.cmds.Workflows.StepRun(ctx, runID, facts)
	if err != nil {
		if ctx.Err() == nil {
			log.WithError(err).Warn("cannot step run; the sweep will retry")
		}
		return
	}
	if fresh {
		dispatched = startCreated(&st, dispatched)
	}
	s.stepped(ctx, &st, dispatched)
}

// startCreated adds to dispatched the module and child stages of st still CREATED: those its
// trigger's commit dispatched (commands' firstStep), which no one has started when the log
// brings the trigger to an instance that did not write it. Starting one twice is harmless:
// its execution's (or child run's) id is derived from the stage, so the second write is a
// no-op.
func startCreated(st *run.State, dispatched []run.Stage) []run.Stage {
	if st.Status.Terminal() {
		return dispatched
	}
	for _, stage := range st.Stages {
		if stage.Status != run.StageStatusCreated || (stage.ExecutionID == "" && stage.ChildRunID == "") {
			continue
		}
		if !slices.ContainsFunc(dispatched, func(d run.Stage) bool { return d.ID == stage.ID }) {
			dispatched = append(dispatched, stage)
		}
	}
	return dispatched
}

// stepped follows a step written, here or in a stage's charge commit (StageStep): it tells
// Ended of a run that ended and starts the stages the step dispatched.
func (s *Scheduler) stepped(ctx context.Context, st *run.State, dispatched []run.Stage) {
	if s.opts.Ended != nil && st.Status.Terminal() {
		s.opts.Ended(st.ID)
	}
	if st.Waiting() {
		s.settle(ctx, st.QueueID) // woken ahead of the log (Wake): its queue may admit it now
		return
	}
	if !st.Status.Terminal() {
		s.armWait(st.ID, st.NextWait())
	}
	if err := s.submit(ctx, st, dispatched); err != nil && ctx.Err() == nil {
		s.log.WithField("runId", st.ID).WithError(err).Warn("cannot submit stage executions; the sweep will retry")
	}
}

// submitParallel bounds the executions one step submits at once (a FOR_EACH admits many);
// runFirstParallel bounds them when the runner takes them, which write nothing each but wait
// for their workspace's next charge batch: the more wait together, the fewer batches.
const (
	submitParallel   = 16
	runFirstParallel = 128
)

func (s *Scheduler) submit(ctx context.Context, st *run.State, stages []run.Stage) error {
	if len(stages) == 1 {
		return s.start(ctx, st, stages[0])
	}
	parallel := submitParallel
	if s.opts.Runner != nil {
		parallel = runFirstParallel
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, parallel)
	)
	for _, stage := range stages {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.start(ctx, st, stage); err != nil {
				mu.Lock()
				first = errors.Join(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// start runs a dispatched stage in this process's runner when it takes it, queueing its
// outcome for the run's next step, and otherwise submits its execution through the log.
// A stage the runner gives up on is submitted all the same: should the runner record it
// after all, first or last, the execution's id makes the other write a no-op.
func (s *Scheduler) start(ctx context.Context, st *run.State, stage run.Stage) error {
	if r := s.opts.Runner; r != nil && r.Running() {
		if first, ok := s.cmds.StageFirstRun(st, stage, r.Worker()); ok {
			// Alone in flight: its outcome's step can go into its charge commit (StageStep),
			// for no other outcome of the run can be stepped meanwhile.
			if st.Alone(stage.ID) {
				first.Step = &commands.StageStep{RunID: st.ID}
			}
			if end, ok := s.runFirst(ctx, r, first); ok && end.Status.Terminal() {
				if first.Step != nil && first.Step.Written {
					s.settleChained(st, &first.Step.After, end.ID)
					s.stepped(ctx, &first.Step.After, first.Step.Dispatched)
					return nil
				}
				s.enqueue(ctx, st.ID, run.FactsOf(end)...)
				return nil
			}
		}
	}
	return s.cmds.Workflows.SubmitStage(ctx, st, stage)
}

// runFirst has the runner run a stage's execution first, holding what the log brings about it
// meanwhile (takeFact): its charge commit may step the run before the log tells this process
// of it, and a step for a fact already recorded costs a read of the run. When the runner
// settles the execution, the held facts are dropped (and later ones too: settled); when it
// does not, they are stepped as if they had just come.
func (s *Scheduler) runFirst(ctx context.Context, r commands.Runner, first commands.FirstRun) (execution.State, bool) {
	id := first.State.ID
	s.mu.Lock()
	_, dup := s.running[id]
	if !dup {
		s.running[id] = nil
	}
	s.mu.Unlock()
	end, ok := r.TryRunFirst(ctx, first)
	if dup {
		return end, ok // another start holds its facts: it steps or drops them
	}
	settled := ok && end.Status.Terminal()
	s.mu.Lock()
	held := s.running[id]
	delete(s.running, id)
	if settled && !slices.ContainsFunc(held, func(f run.Fact) bool { return f.Kind != run.FactStarted }) {
		remember(s.settled, end.ID) // its end is still to come from the log, to be dropped then
	}
	s.mu.Unlock()
	if !settled && len(held) > 0 {
		s.enqueue(ctx, first.State.RunID, held...)
	}
	return end, ok
}

// settleChained remembers as settled the stage executions other than head's that ended between
// before and after: a chain's, which the runner wrote in head's commit (commands.ChainNext).
func (s *Scheduler) settleChained(before, after *run.State, head string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rememberEnded(before, after, head)
}

// endedIn reports whether stage id of st has ended.
func endedIn(st *run.State, id string) bool {
	was, ok := st.Stage(id)
	return ok && was.Status.Terminal()
}

// rememberEnded remembers as settled the stage executions, other than skip, that ended in after
// and not in before (nil: none did); s.mu is held.
func (s *Scheduler) rememberEnded(before, after *run.State, skip string) {
	for _, stage := range after.Stages {
		if stage.ExecutionID == "" || stage.ExecutionID == skip || !stage.Status.Terminal() {
			continue
		}
		if before == nil || !endedIn(before, stage.ID) {
			remember(s.settled, stage.ExecutionID)
		}
	}
}

// sweep reconciles unfinished runs unchanged since before with their stage executions.
func (s *Scheduler) sweep(ctx context.Context, before time.Time) {
	ids, err := s.queries.UnfinishedRuns(ctx, before, 500)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WithError(err).Warn("sweep for unfinished runs failed")
		}
		return
	}
	for _, id := range ids {
		if err := s.reconcile(ctx, id); err != nil && ctx.Err() == nil {
			s.log.WithError(err).WithField("runId", id).Warn("cannot reconcile run")
		}
	}
}

// triggers selects the events that add a run to the read model the sweep reads.
var triggers = eventstore.Filter{Types: []string{run.Triggered{}.EventType()}}

// awaitTriggersProjected waits until the runs read model holds every run triggered before the
// feed's head, for at most a sweep grace. The feed brings only what follows its head, and the
// lead's first sweep reads the read model: a run triggered just before the lead opened its
// feed and not projected yet would otherwise wait for a sweep whose grace lets it see the run
// (and not at all where sweeps are rare).
func (s *Scheduler) awaitTriggersProjected(ctx context.Context) {
	head, err := s.store.HeadPosition(ctx)
	if err != nil {
		return // the sweeps after the grace find what this would have waited for
	}
	deadline := time.NewTimer(s.opts.SweepGrace)
	defer deadline.Stop()
	for {
		projected, err := s.queries.RunsProjectedTo(ctx)
		if err != nil {
			return
		}
		next, err := s.store.ReadAll(ctx, projected, 1, triggers)
		if err != nil || len(next) == 0 || head.Less(next[0].Position) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			s.log.Warn("the runs read model is behind the log; runs triggered before this lead wait for a sweep")
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reconcile reads the executions of a run's open stages, submitting any that is missing (the
// scheduler stopped between dispatching and submitting), and steps the run with what they
// show.
func (s *Scheduler) reconcile(ctx context.Context, runID string) error {
	st, err := s.cmds.Workflows.Run(ctx, runID)
	if err != nil {
		return err
	}
	if d := st.Deadline(); !d.IsZero() && !st.Status.Terminal() {
		s.armDeadline(ctx, runID, d)
	}
	if !st.Status.Terminal() {
		s.armWait(runID, st.NextWait())
	}
	if st.ParentRunID != "" {
		if _, err := s.cmds.Workflows.CancelOrphan(ctx, &st); err != nil {
			return err
		}
	}
	var facts []run.Fact
	for _, stage := range st.Stages {
		if stage.ChildRunID != "" && !stage.Status.Terminal() {
			f, err := s.childFacts(ctx, &st, stage)
			if err != nil {
				return err
			}
			facts = append(facts, f...)
			continue
		}
		if stage.Status.Terminal() || stage.ExecutionID == "" {
			continue
		}
		ex, err := s.cmds.Executions.Execution(ctx, stage.ExecutionID)
		if errors.Is(err, domain.ErrNotFound) {
			if err := s.cmds.Workflows.SubmitStage(ctx, &st, stage); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		facts = append(facts, run.FactsOf(ex)...)
	}
	s.enqueue(ctx, runID, facts...)
	return nil
}
