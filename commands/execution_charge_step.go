package commands

import (
	"context"
	"errors"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

// StageStep carries a run's next step into the charge commit of one of its stages, which the
// runner ran first (FirstRun.Step): the stage's submit, outcome and charge, the run's record of
// the outcome and the dispatch of what follows are then one commit, where they took two. The
// scheduler sets it on a stage that is the only one of its run in flight, so no other step of
// the run can be decided meanwhile; a run moved by anyone else (a cancel) refuses this part
// alone, and the scheduler steps the run from the outcome as it does without a StageStep.
type StageStep struct {
	// RunID is the run the stage belongs to.
	RunID string

	// Written reports that the step went into the commit; After is then the run after it,
	// and Dispatched the stages it dispatched, for the scheduler to start. Set by the charge,
	// read by the scheduler once the runner answers.
	Written    bool
	After      run.State
	Dispatched []run.Stage
}

// plannedStep is a StageStep decided into a charge plan.
type plannedStep struct {
	item, part int
	after      loaded[run.State]
	dispatched []run.Stage
}

// stepPart decides the step of the run, as the scheduler last left it in this process's
// cache, that records the outcome ex of one of its stages. false: nothing to fold (the run
// is not cached, has ended, or the step decides nothing), and the scheduler steps it.
func (h *Charges) stepPart(ctx context.Context, runID string, ex execution.State) (eventstore.StreamAppend, plannedStep, bool) {
	stream := RunStream(runID)
	cur, _, cached := cachedState(h, stream, runAgg)
	if !cached || !cur.exists {
		return eventstore.StreamAppend{}, plannedStep{}, false
	}
	events, dispatched := run.StepWith(cur.state, run.FactsOf(ex), runEval(ctx), h.now())
	if len(events) == 0 {
		return eventstore.StreamAppend{}, plannedStep{}, false
	}
	data, err := encodeEvents(ctx, events)
	if err != nil || storable(data) != nil {
		return eventstore.StreamAppend{}, plannedStep{}, false
	}
	next := cur
	next.state = runAgg.clone(cur.state)
	for _, e := range events {
		next.state = runAgg.evolve(next.state, e)
	}
	return eventstore.StreamAppend{Stream: stream, Expected: cur.expected(), Events: data},
		plannedStep{after: next, dispatched: dispatched}, true
}

// planStep adds item i's run step to plan, after the item's execution part; at most one step
// of a run goes into a batch.
func (h *Charges) planStep(ctx context.Context, plan *chargePlan, i int, it ChargedFinish, ex execution.State) {
	if it.Step == nil {
		return
	}
	for _, s := range plan.steps {
		if plan.parts[s.part].Stream == RunStream(it.Step.RunID) {
			return
		}
	}
	part, step, ok := h.stepPart(ctx, it.Step.RunID, ex)
	if !ok {
		return
	}
	step.item, step.part = i, len(plan.parts)
	plan.steps, plan.parts = append(plan.steps, step), append(plan.parts, part)
}

// stepsWritten caches the runs a written plan stepped and tells their StageSteps.
func (h *Charges) stepsWritten(items []ChargedFinish, plan chargePlan, res []eventstore.AppendResult) {
	for _, s := range plan.steps {
		after := s.after
		after.revision, after.exists = res[s.part].NextRevision, true
		h.cache.put(plan.parts[s.part].Stream, after)
		step := items[s.item].Step
		step.Written, step.After, step.Dispatched = true, after.state, s.dispatched
	}
}

// runConflict reports the run stream an append was refused on: a run moved by another writer
// since the scheduler stepped it.
func runConflict(err error) (string, bool) {
	var wrong *eventstore.WrongExpectedVersionError
	if errors.As(err, &wrong) && eventstore.Category(wrong.Stream) == run.Category {
		return wrong.Stream, true
	}
	return "", false
}

// dropSteps takes the steps of the run at stream out of items, for the batch to be written
// again without them; false when none had one (the conflict is not a step's).
func dropSteps(items []ChargedFinish, live []int, stream string) bool {
	dropped := false
	for _, i := range live {
		if s := items[i].Step; s != nil && RunStream(s.RunID) == stream {
			items[i].Step, dropped = nil, true
		}
	}
	return dropped
}
