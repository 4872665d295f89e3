package scheduler

import (
	"context"
	"errors"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
)

// Child runs (RUN_WORKFLOW stages) move their parents through the log only: the child's
// RunTriggered starts the parent's stage, its RunFinished ends it, and a parent's RunFinished
// FAILED cancels its open children. Each is read in the background, off the feed's loop; a
// reaction lost to a crash is redone by the sweep (reconcile), which reads the children of a
// stalled parent and the parent of a stalled child.

// background runs fn beside the feed's loop; Run waits for it before returning.
func (s *Scheduler) background(ctx context.Context, fn func()) {
	if ctx.Err() != nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// childStarted moves the parent's stage to RUNNING, or cancels the child when its parent had
// already failed before it started (the parent's end found no child to cancel then).
func (s *Scheduler) childStarted(ctx context.Context, childID string) {
	child, err := s.cmds.Workflows.Run(ctx, childID)
	if err == nil {
		var cancelled bool
		if cancelled, err = s.cmds.Workflows.CancelOrphan(ctx, &child); err == nil && !cancelled {
			s.enqueue(ctx, child.ParentRunID, run.ChildFacts(&child)...)
		}
	}
	if err != nil && ctx.Err() == nil {
		s.log.WithError(err).WithField("runId", childID).Warn("cannot follow a child run's start; the sweep will retry")
	}
}

// runEnded steps the parent of a run that ended with its outcome, and cancels the open children
// of a run that FAILED.
func (s *Scheduler) runEnded(ctx context.Context, runID string, revision uint64) {
	parent, facts, err := s.cmds.Workflows.RunEnded(ctx, runID, revision)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WithError(err).WithField("runId", runID).Warn("cannot follow a run's end; the sweep will retry")
		}
		return
	}
	if parent != "" {
		s.enqueue(ctx, parent, facts...)
	}
}

// childFacts is what the child run of a parent's open RUN_WORKFLOW stage says about it; a child
// never started (the scheduler stopped between dispatching the stage and starting it) is
// started now.
func (s *Scheduler) childFacts(ctx context.Context, parent *run.State, stage run.Stage) ([]run.Fact, error) {
	child, err := s.cmds.Workflows.Run(ctx, stage.ChildRunID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, s.cmds.Workflows.SubmitStage(ctx, parent, stage)
	}
	if err != nil {
		return nil, err
	}
	return run.ChildFacts(&child), nil
}
