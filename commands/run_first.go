package commands

import (
	"context"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

// triggerFirst writes a new run together with its first stage, run first in this process's
// runner: the trigger's events (events, whose first step dispatched the stages dispatched, and
// which leave the run s: the chain and the commit read it, never evolve it),
// the stage's submit, outcome and charge, and the run's record of that outcome and dispatch of
// what follows are one commit of the workspace's charge batch, which takes claim and carries
// check (triggerWorkflow: a check that fails leaves the run out, dropSteps). Without it a
// run of n such stages took n+1 commits, one after the other; with it, n.
//
// It answers the run after that commit and the stages it dispatched, or false when it did not
// write the run: the run's first step did not dispatch exactly one stage a runner takes first
// (a repeatable built-in module that bills), no runner runs here, or the runner did not record
// it (busy, the balance short, the run's id taken). The caller then writes the trigger alone.
// Should the runner still record it after giving up, the caller's trigger and this commit both
// expect no run stream, so exactly one of them writes the run; a commit refused for that leaves
// the stage's execution unwritten too (dropSteps).
func triggerFirst(ctx context.Context, h *Workflows, runID string, events []domain.Event, s run.State, dispatched []run.Stage, claim *RequestClaim, check eventstore.StreamAppend) (run.State, []run.Stage, bool) {
	r := h.runner
	if r == nil || !r.Running() || len(dispatched) != 1 {
		return run.State{}, nil, false
	}
	first, ok := stageFirstRun(h.core, &s, dispatched[0], r.Worker())
	if !ok {
		return run.State{}, nil, false
	}
	first.Claim = claim
	first.Step = &StageStep{RunID: runID, Create: events, check: check, base: &s}
	end, ok := r.TryRunFirst(ctx, first)
	if !ok || !end.Status.Terminal() || !first.Step.Written {
		return run.State{}, nil, false
	}
	return first.Step.After.Clone(), first.Step.Dispatched, true
}
