package commands_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

// twoEchoes saves a workflow ON_API_CALLED -> a -> b of core.echo stages through h.
func twoEchoes(t *testing.T, h *commands.Commands, ws string) string {
	t.Helper()
	wf, err := h.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws, Definition: mustDef(t, `{"name": "two",
		"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	return wf.ID
}

// With a runner in the process, a trigger whose first step dispatches one stage the runner takes
// first writes the run, that stage's submit, outcome and charge, and the run's next step in one
// commit, and wakes the scheduler with the run as that commit left it.
func TestATriggerWritesItsFirstStageInItsCommit(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ctx := context.Background()
	runner := &recordingRunner{cmds: commands.New(env.Store)}
	var woken run.State
	var next []run.Stage
	h := commands.WithRunWaker(commands.WithRunner(runner.cmds, runner), func(st run.State, dispatched []run.Stage) { woken, next = st, dispatched })
	runs, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: twoEchoes(t, h, ws), Input: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !runner.last.Recorded {
		t.Fatalf("the first stage was not recorded with the trigger: %+v", runner.last)
	}
	id := runs[0].RunID
	runTx := env.Commits(t, commands.RunStream(id))
	stageTx := env.Commits(t, commands.ExecutionStream(runner.last.State.ID), commands.BillingStream(ws))
	if len(runTx) != 1 || len(stageTx) != 2 || !slices.Contains(stageTx, runTx[0]) {
		t.Fatalf("run commits %v, stage execution and account commits %v: not one commit", runTx, stageTx)
	}
	got, err := commands.New(env.Store).Workflows.Run(ctx, id) // from the log, not the cache
	if err != nil {
		t.Fatal(err)
	}
	if a := stageOf(got, "a"); a.Status != run.StageStatusCompleted || compact(t, a.Output) != `{"n":1}` {
		t.Fatalf("stage a in the log: %s %s", a.Status, a.Output)
	}
	if woken.ID != id || stageOf(woken, "a").Status != run.StageStatusCompleted || len(next) != 1 || next[0].ComponentID != "b" {
		t.Fatalf("woken with run %q (a %s) and %d dispatched", woken.ID, stageOf(woken, "a").Status, len(next))
	}
	if b, err := h.Billing.Balance(ctx, ws); err != nil || b.Total() != billing.FromWhole(9) {
		t.Fatalf("balance %v (%v), want 9 credits", b.Total(), err)
	}
}

// Should the run exist when the batch comes to write it (the trigger, its runner having given
// up, wrote it alone meanwhile), the stage's execution and charge are left out with it: an
// execution never exists without its run, and the scheduler runs the stage as it does any other.
func TestARunFirstTriggerWhoseRunExistsWritesNothingOfIt(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ctx := context.Background()
	runner := &recordingRunner{cmds: commands.New(env.Store)}
	runner.before = func(first commands.FirstRun) {
		var data []eventstore.EventData
		for _, e := range first.Step.Create {
			b, err := domain.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, eventstore.EventData{ID: uuid.New(), Type: e.EventType(), Data: b})
		}
		if _, err := env.Store.Append(ctx, commands.RunStream(first.Step.RunID), eventstore.NoStream(), data...); err != nil {
			t.Fatal(err)
		}
	}
	h := commands.WithRunner(runner.cmds, runner)
	runs, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: twoEchoes(t, h, ws), Input: json.RawMessage(`{"n":1}`)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("trigger: %v %v", runs, err)
	}
	if runner.last.Recorded || runner.last.Err == nil {
		t.Fatalf("the batch wrote a stage of a run it did not create: %+v", runner.last)
	}
	got, err := commands.New(env.Store).Workflows.Run(ctx, runs[0].RunID)
	a := stageOf(got, "a")
	if err != nil || a.Status != run.StageStatusCreated || a.ExecutionID == "" {
		t.Fatalf("run: stage a %s (%v), want CREATED for the scheduler", a.Status, err)
	}
	if evs, err := env.Store.ReadStream(ctx, commands.ExecutionStream(a.ExecutionID), 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("the stage's execution has %d events (%v)", len(evs), err)
	}
	if b, err := h.Billing.Balance(ctx, ws); err != nil || b.Total() != billing.FromWhole(10) {
		t.Fatalf("balance %v (%v): the stage left out was charged", b.Total(), err)
	}
}

// compact is js without insignificant space.
func compact(t *testing.T, js json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, js); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// stageOf is the stage of component id in st (no iteration), zero when none.
func stageOf(st run.State, id string) run.Stage {
	for _, s := range st.Stages {
		if s.ComponentID == id {
			return s
		}
	}
	return run.Stage{}
}
