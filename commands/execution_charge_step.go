package commands

import (
	"context"
	"errors"
	"slices"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
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
	// Create, when set, are the events that create the run (its trigger and first step,
	// which dispatched the stage): the run does not exist yet, and they are written first in
	// the commit, which expects no run stream, with the request's metadata
	// (ChargedFinish.CreateMeta). The step is then the item's condition: an item whose step
	// cannot be decided or written is left out whole, for its execution must not exist
	// without its run (run_first.go).
	Create []domain.Event
	// check, with Create, is a part without events that the commit carries before the run's:
	// the workflow at the revision the trigger decided on (triggerWorkflow). When it fails the
	// item is left out whole, as when the run exists.
	check eventstore.StreamAppend
	// chained marks the step of a stage a chain ran after another of its run (ChainNext): its
	// stage exists only if the step before it dispatched it, so the item stands or falls with
	// its step, which is decided on the run as that step leaves it. base is the run the step
	// is expected to be decided on (a chain's, or the one Create makes), for the next link to
	// be decided on; it is shared, and only read.
	chained bool
	base    *run.State

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

// stepPart decides the step of the run as cur (before, when it has no revision, the run's
// creation, encoded in created) that records the outcome ex of one of its stages. false:
// nothing to fold (the step decides nothing, or what it decides cannot be stored), and the
// scheduler steps it.
func (h *Charges) stepPart(ctx context.Context, cur loaded[run.State], ex execution.State) ([]eventstore.EventData, plannedStep, bool) {
	events, dispatched := run.StepWith(cur.state, run.FactsOf(ex), runEval(ctx), h.now())
	if len(events) == 0 {
		return nil, plannedStep{}, false
	}
	data, err := encodeEvents(ctx, events)
	if err != nil || storable(data) != nil {
		return nil, plannedStep{}, false
	}
	next := cur
	next.state = runAgg.clone(cur.state)
	for _, e := range events {
		next.state = runAgg.evolve(next.state, e)
	}
	return data, plannedStep{after: next, dispatched: dispatched}, true
}

// runBefore is the run a step is decided on: the cached one, or the one step.Create makes,
// with those events encoded under meta. false: no run to step.
func (h *Charges) runBefore(ctx context.Context, stream string, step *StageStep, meta Metadata) (loaded[run.State], []eventstore.EventData, bool) {
	if len(step.Create) == 0 {
		cur, _, cached := cachedState(h, stream, runAgg)
		return cur, nil, cached && cur.exists
	}
	var cur loaded[run.State] // not written yet: expected() is no stream
	if step.base != nil {
		cur.state = *step.base // folded from Create by who made it; read, never evolved
	} else {
		for _, e := range step.Create {
			cur.state = runAgg.evolve(cur.state, e)
		}
	}
	created, err := encodeEvents(WithMetadata(ctx, meta), step.Create)
	if err != nil || storable(created) != nil {
		return cur, nil, false
	}
	return cur, created, true
}

// planStep adds item i's run step to plan. The first step of a run in the batch is a part of
// its own, at the plan's end; a later one (a chain's) is decided on the run as the one before
// leaves it and joins that part. false: no step was added.
func (h *Charges) planStep(ctx context.Context, plan *chargePlan, i int, it ChargedFinish, ex execution.State) bool {
	if it.Step == nil {
		return false
	}
	stream := RunStream(it.Step.RunID)
	prior := slices.IndexFunc(plan.steps, func(s plannedStep) bool { return plan.parts[s.part].Stream == stream })
	var cur loaded[run.State]
	var created []eventstore.EventData
	if prior >= 0 {
		if len(it.Step.Create) > 0 {
			return false // a run created twice
		}
		for _, s := range plan.steps[prior:] {
			if plan.parts[s.part].Stream == stream {
				cur = s.after
			}
		}
	} else {
		var ok bool
		if cur, created, ok = h.runBefore(ctx, stream, it.Step, it.CreateMeta); !ok {
			return false
		}
	}
	if it.Step.chained && !dispatched(cur.state, ex.ID) {
		return false // the step before it, which dispatched it, is not in the batch
	}
	data, step, ok := h.stepPart(ctx, cur, ex)
	if !ok {
		return false
	}
	step.item = i
	if prior >= 0 {
		step.part = plan.steps[prior].part
		plan.parts[step.part].Events = append(plan.parts[step.part].Events, data...)
	} else {
		if c := it.Step.check; c.Stream != "" && !slices.ContainsFunc(plan.parts, func(p eventstore.StreamAppend) bool { return p.Stream == c.Stream && p.Expected == c.Expected }) {
			plan.parts = append(plan.parts, c) // once a batch: runs of one workflow share it
		}
		step.part = len(plan.parts)
		plan.parts = append(plan.parts, eventstore.StreamAppend{Stream: stream, Expected: cur.expected(), Events: append(created, data...)})
	}
	plan.steps = append(plan.steps, step)
	return true
}

// dispatched reports whether execution id is a stage of st dispatched and not started.
func dispatched(st run.State, id string) bool {
	return slices.ContainsFunc(st.Stages, func(s run.Stage) bool { return s.ExecutionID == id && s.Status == run.StageStatusCreated })
}

// stepRequired reports whether it stands or falls with its run step: the step creates the
// run, or dispatched it.stage in the commit (a chain's).
func (it ChargedFinish) stepRequired() bool {
	return it.Step != nil && (len(it.Step.Create) > 0 || it.Step.chained)
}

// stepsWritten caches the runs a written plan stepped and tells their StageSteps.
func (h *Charges) stepsWritten(items []ChargedFinish, plan chargePlan, res []eventstore.AppendResult) {
	for _, s := range plan.steps {
		step := items[s.item].Step
		step.Written, step.After, step.Dispatched = true, s.after.state, s.dispatched
	}
	for stream, after := range runsAfter(plan, res) {
		h.cache.put(stream, after)
	}
}

// runsAfter is each run a written plan stepped as the commit leaves it, at the commit's revision
// (res, the store's results): the states to cache. A chain's earlier steps are not among them:
// cached at that revision, such a state would pass for the run's current one, and a load of the
// run between two puts could put it back after the last.
func runsAfter(plan chargePlan, res []eventstore.AppendResult) map[string]loaded[run.State] {
	out := make(map[string]loaded[run.State], len(plan.steps))
	for _, s := range plan.steps { // in order: a run's last step comes last
		after := s.after
		after.revision, after.exists = res[s.part].NextRevision, true
		out[plan.parts[s.part].Stream] = after
	}
	return out
}

// runConflict reports the run stream an append was refused on (a run moved by another writer
// since the scheduler stepped it), or the workflow stream a trigger's check was (StageStep.check).
func runConflict(err error) (string, bool) {
	var wrong *eventstore.WrongExpectedVersionError
	if errors.As(err, &wrong) && (eventstore.Category(wrong.Stream) == run.Category || eventstore.Category(wrong.Stream) == workflow.Category) {
		return wrong.Stream, true
	}
	return "", false
}

// dropSteps takes the steps of the run at stream (or checking the workflow at stream) out of
// items, for the batch to be written again without them, and returns the items still in it;
// false when none had one (the conflict is not a step's). An item that stands or falls with
// its step (stepRequired: it creates the run, or is a chain's) is left out whole
// (errNotCreated): its execution must not exist without its run, or without the step that
// dispatched it.
func dropSteps(items []ChargedFinish, live []int, results []FinishResult, stream string) ([]int, bool) {
	dropped := false
	ofStream := func(i int) bool {
		s := items[i].Step
		return s != nil && (RunStream(s.RunID) == stream || s.check.Stream == stream)
	}
	for _, i := range live {
		if ofStream(i) && !items[i].stepRequired() {
			items[i].Step, dropped = nil, true
		}
	}
	rest := leaveOut(live, results, errNotCreated, func(i int) bool { return ofStream(i) && items[i].stepRequired() })
	return rest, dropped || len(rest) < len(live)
}
