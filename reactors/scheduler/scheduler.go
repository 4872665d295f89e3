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
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/feed"
)

// LockFunc runs fn while this process holds the scheduler's lock (projections.HoldLock).
type LockFunc func(ctx context.Context, fn func(context.Context) error) error

// Options configures a Scheduler.
type Options struct {
	// Lock elects the one scheduling instance; nil schedules without one (a single process).
	Lock LockFunc
	// SweepInterval is how often runs that stopped moving are reconciled. Default 2s.
	SweepInterval time.Duration
	// SweepGrace is how long a run must be still before a sweep looks at it. Default 5s.
	SweepGrace time.Duration
	// Concurrency bounds the runs stepped at once. Default 32.
	Concurrency int
	Logger      logrus.FieldLogger
}

// Scheduler advances runs.
type Scheduler struct {
	cmds    *commands.Handler
	queries *projections.Queries
	opts    Options
	log     logrus.FieldLogger
	slots   chan struct{}

	mu     sync.Mutex
	queued map[string][]run.Fact // runs with something to do, and the facts to record
	busy   map[string]bool
	wg     sync.WaitGroup
}

// New returns a scheduler; Run starts it.
func New(cmds *commands.Handler, queries *projections.Queries, opts Options) *Scheduler {
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = 2 * time.Second
	}
	if opts.SweepGrace <= 0 {
		opts.SweepGrace = 5 * time.Second
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	if opts.Logger == nil {
		opts.Logger = logrus.StandardLogger()
	}
	if opts.Lock == nil {
		opts.Lock = func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }
	}
	return &Scheduler{cmds: cmds, queries: queries, opts: opts, log: opts.Logger.WithField("component", "scheduler"),
		slots: make(chan struct{}, opts.Concurrency), queued: map[string][]run.Fact{}, busy: map[string]bool{}}
}

// Run schedules while it holds the lock, waiting for it again if it loses it, until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := s.opts.Lock(ctx, s.lead)
		if err != nil && ctx.Err() == nil {
			s.log.WithError(err).Warn("scheduler interrupted; waiting for the lock again")
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	s.wg.Wait()
	return nil
}

// filter selects what moves runs: triggers, and the execution events of stages.
var filter = eventstore.Filter{Types: []string{run.Triggered{}.EventType(), execution.Started{}.EventType(),
	execution.Completed{}.EventType(), execution.Failed{}.EventType()}}

// lead schedules until ctx ends: the live feed first, then a sweep of every unfinished run,
// so nothing that happened before this process took over is missed.
func (s *Scheduler) lead(ctx context.Context) error {
	events, err := feed.Open(ctx, s.cmds.Store(), filter, s.log)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	s.log.Info("scheduler running")
	s.sweep(ctx, s.cmds.Now().Add(time.Hour))
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
			s.sweep(ctx, s.cmds.Now().Add(-s.opts.SweepGrace))
		}
	}
}

// take turns a logged event into work on its run.
func (s *Scheduler) take(ctx context.Context, rec eventstore.RecordedEvent) {
	ev, err := domain.Events.Decode(rec.Type, rec.Data)
	if err != nil {
		s.log.WithError(err).Warn("undecodable event skipped")
		return
	}
	switch e := ev.(type) {
	case run.Triggered:
		s.enqueue(ctx, e.RunID)
	case execution.Started:
		if e.RunID != "" {
			s.enqueue(ctx, e.RunID, run.Fact{ExecutionID: e.ExecutionID, Kind: run.FactStarted, Attempt: e.Attempt, At: e.At})
		}
	case execution.Completed:
		if e.RunID != "" {
			s.enqueue(ctx, e.RunID, run.Fact{ExecutionID: e.ExecutionID, Kind: run.FactCompleted, Attempt: e.Attempt,
				Output: e.Output, Usage: e.TotalUsage, At: e.At})
		}
	case execution.Failed:
		if e.RunID != "" {
			s.enqueue(ctx, e.RunID, run.Fact{ExecutionID: e.ExecutionID, Kind: run.FactFailed, Attempt: e.Attempt, Error: e.Error, At: e.At})
		}
	}
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
		if !ok || ctx.Err() != nil {
			delete(s.busy, runID)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.step(ctx, runID, facts)
	}
}

// step records facts on the run, advances it and submits the executions of the stages it
// dispatched. A failure is logged and left to the sweep, which rebuilds the facts from the
// executions themselves.
func (s *Scheduler) step(ctx context.Context, runID string, facts []run.Fact) {
	log := s.log.WithField("runId", runID)
	st, dispatched, err := s.cmds.StepRun(ctx, runID, facts)
	if err != nil {
		if ctx.Err() == nil {
			log.WithError(err).Warn("cannot step run; the sweep will retry")
		}
		return
	}
	if err := s.submit(ctx, &st, dispatched); err != nil && ctx.Err() == nil {
		log.WithError(err).Warn("cannot submit stage executions; the sweep will retry")
	}
}

// submitParallel bounds the executions one step submits at once (a FOR_EACH admits many).
const submitParallel = 16

func (s *Scheduler) submit(ctx context.Context, st *run.State, stages []run.Stage) error {
	if len(stages) == 1 {
		return s.cmds.SubmitStage(ctx, st, stages[0])
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, submitParallel)
	)
	for _, stage := range stages {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.cmds.SubmitStage(ctx, st, stage); err != nil {
				mu.Lock()
				first = errors.Join(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
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

// reconcile reads the executions of a run's open stages, submitting any that is missing (the
// scheduler stopped between dispatching and submitting), and steps the run with what they
// show.
func (s *Scheduler) reconcile(ctx context.Context, runID string) error {
	st, err := s.cmds.Run(ctx, runID)
	if err != nil {
		return err
	}
	var facts []run.Fact
	for _, stage := range st.Stages {
		if stage.Status.Terminal() || stage.ExecutionID == "" {
			continue
		}
		ex, err := s.cmds.Execution(ctx, stage.ExecutionID)
		if errors.Is(err, domain.ErrNotFound) {
			if err := s.cmds.SubmitStage(ctx, &st, stage); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		facts = append(facts, factsOf(ex)...)
	}
	s.enqueue(ctx, runID, facts...)
	return nil
}

// factsOf is what an execution's state says about its stage.
func factsOf(ex execution.State) []run.Fact {
	f := run.Fact{ExecutionID: ex.ID, Attempt: ex.Attempt, At: ex.UpdatedAt}
	switch ex.Status {
	case execution.StatusRunning:
		f.Kind = run.FactStarted
	case execution.StatusCompleted:
		f.Kind, f.Output, f.Usage = run.FactCompleted, ex.Output, ex.TotalUsage
	case execution.StatusFailed:
		f.Kind, f.Error = run.FactFailed, ex.Error
	default:
		return nil
	}
	return []run.Fact{f}
}
