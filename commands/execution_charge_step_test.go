package commands_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// stepReady triggers a run of one core.echo stage through h, whose commit dispatches the stage,
// and reads the run, so it is cached in h; it returns the run and the item
// that records the stage's outcome with the run's next step (StageStep).
func stepReady(t *testing.T, env *testenv.Env, h *commands.Commands, ws string) (run.State, commands.ChargedFinish) {
	t.Helper()
	st, first := firstStageOf(t, h, ws, `{"name": "one",
		"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}]}`)
	return st, commands.FinishedFirst(first, chargeWorker, json.RawMessage(`{"n":1}`), commands.Metadata{})
}

// firstStageOf saves the workflow def (its trigger followed by one core.echo stage) through h,
// triggers it with {"n":1} and reads the run, so it is cached in h; it returns the run and its
// first stage as the scheduler hands it to the runner, with a StageStep.
func firstStageOf(t *testing.T, h *commands.Commands, ws, def string) (run.State, commands.FirstRun) {
	t.Helper()
	ctx := context.Background()
	wf, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: mustDef(t, def)})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID, Input: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	st, dispatched := triggerDispatched(t, h, runs[0].RunID)
	if len(dispatched) != 1 {
		t.Fatalf("trigger: %d dispatched", len(dispatched))
	}
	first, ok := h.StageFirstRun(&st, dispatched[0], chargeWorker)
	if !ok {
		t.Fatal("a core.echo stage is not run first")
	}
	first.Step = &commands.StageStep{RunID: st.ID}
	return st, first
}

// A stage's outcome, its charge and its run's next step go into one commit, and the run ends
// with it.
func TestAStageCarriesItsRunsStepIntoItsChargeCommit(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	st, item := stepReady(t, env, env.Cmds, ws)
	res, err := env.Cmds.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{item})
	if err != nil || !res[0].Recorded {
		t.Fatalf("charge: %+v %v", res, err)
	}
	if !item.Step.Written || item.Step.After.Status != run.StatusCompleted || len(item.Step.Dispatched) != 0 {
		t.Fatalf("step: written %v, run %s, %d dispatched", item.Step.Written, item.Step.After.Status, len(item.Step.Dispatched))
	}
	// Read back from the log, not the cache.
	got, err := commands.New(env.Store).Workflows.Run(context.Background(), st.ID)
	if err != nil || got.Status != run.StatusCompleted {
		t.Fatalf("run %s (%v)", got.Status, err)
	}
	runTx := env.Commits(t, commands.RunStream(st.ID))
	chargeTx := env.Commits(t, commands.ExecutionStream(item.ExecutionID), commands.BillingStream(ws))
	if len(chargeTx) != 2 || !slices.Contains(runTx, chargeTx[len(chargeTx)-1]) {
		t.Fatalf("run commits %v, execution and account commits %v: the step is not in the charge commit", runTx, chargeTx)
	}
}

// A run moved by another writer since it was stepped (here a cancel from another process)
// refuses the step alone: the stage's outcome and charge are written, the step is not, and
// the scheduler steps the run from the outcome.
func TestAStepOnAMovedRunLeavesTheChargeWritten(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	st, item := stepReady(t, env, env.Cmds, ws)
	if _, err := commands.New(env.Store).Workflows.CancelRun(context.Background(), st.ID, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := env.Cmds.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{item})
	if err != nil || !res[0].Recorded {
		t.Fatalf("charge: %+v %v", res, err)
	}
	if item.Step.Written {
		t.Fatal("a step decided on a stale run was written")
	}
	b, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || b.Total() != billing.FromWhole(9) {
		t.Fatalf("balance %v (%v), want 9 credits", b.Total(), err)
	}
	after, _, err := env.Cmds.Workflows.StepRun(context.Background(), st.ID, run.FactsOf(res[0].State))
	if err != nil || after.Status != run.StatusFailed {
		t.Fatalf("run after the step the scheduler makes: %s (%v)", after.Status, err)
	}
}
