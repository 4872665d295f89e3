package commands

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
)

// MaxChain bounds the stages of one run a runner writes in one commit (ChainNext): a longer
// run takes more commits, each a chain of its own.
const MaxChain = 16

// FinishedFirst is the charge batch item that records first, run first by worker with output
// out: its submit, completion, charge and run step, in one commit (ChargedFinish.Create); meta
// is the metadata of the request that made it.
func FinishedFirst(first FirstRun, worker string, out json.RawMessage, meta Metadata) ChargedFinish {
	st := first.State
	usage := billing.Credits(st.CostMilli)
	return ChargedFinish{ExecutionID: st.ID,
		Charge:  ChargeRequest{Cause: "execution-" + st.ID, Amount: usage},
		Outcome: Outcome{Worker: worker, Output: out, Usage: usage},
		Create:  first.Create, CreateMeta: meta, Claim: first.Claim, Window: first.Window, Step: first.Step}
}

// ChainNext returns the stage that follows prev, a stage run first whose item carries its
// run's step, when that step would dispatch exactly one stage a runner takes first and leave
// it alone in flight: the runner runs it at once and writes it in prev's commit, its step
// decided on the run as prev's leaves it. A run of such stages then takes one commit where it
// took one a stage. false: the chain ends at prev (nothing follows, or what follows takes the
// usual path: the scheduler starts it once prev's commit is written).
//
// The chain is what this process expects the commit to decide; the commit decides again, and
// writes a link only when the step before it, in the same commit, dispatched its stage
// (StageStep.chained): a link whose run went another way is left out, never written alone.
func (c *Commands) ChainNext(ctx context.Context, prev ChargedFinish) (FirstRun, bool) {
	if prev.Step == nil || len(prev.Create) == 0 {
		return FirstRun{}, false
	}
	before, ok := chainBase(c.Charges, prev.Step)
	if !ok {
		return FirstRun{}, false
	}
	ex, ok := endOf(prev, c.core.now())
	if !ok {
		return FirstRun{}, false
	}
	events, next := run.StepWith(before, run.FactsOf(ex), runEval(ctx), c.core.now())
	if len(events) == 0 || len(next) != 1 {
		return FirstRun{}, false
	}
	after := runAgg.clone(before)
	for _, e := range events {
		after = runAgg.evolve(after, e)
	}
	if !after.Alone(next[0].ID) {
		return FirstRun{}, false
	}
	first, ok := stageFirstRun(c.core, &after, next[0], prev.Outcome.Worker)
	if !ok {
		return FirstRun{}, false
	}
	first.Step = &StageStep{RunID: prev.Step.RunID, chained: true, base: &after}
	return first, true
}

// chainBase is the run the step's decision is expected to start from: the chain's (or, for a
// run the step creates, the one its Create makes), or the cached one. It is read, never
// evolved: ChainNext evolves a clone.
func chainBase(h *Charges, step *StageStep) (run.State, bool) {
	if step.base != nil {
		return *step.base, true
	}
	cur, _, cached := cachedState(h, RunStream(step.RunID), runAgg)
	if !cached || !cur.exists {
		return run.State{}, false
	}
	return cur.state, true
}

// endOf is the execution it creates, as its outcome leaves it.
func endOf(it ChargedFinish, now time.Time) (execution.State, bool) {
	var st execution.State
	for _, e := range it.Create {
		st = st.Evolve(e)
	}
	done, err := it.Outcome.decideFirst(st, now)
	if err != nil {
		return execution.State{}, false
	}
	for _, e := range done {
		st = st.Evolve(e)
	}
	return st, true
}
