package commands_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// triggerDispatched reads run id through h (caching it there) and returns it with the module
// and child stages its trigger's commit dispatched, not started yet.
func triggerDispatched(t *testing.T, h *commands.Commands, id string) (run.State, []run.Stage) {
	t.Helper()
	st, err := h.Workflows.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []run.Stage
	for _, stage := range st.Stages {
		if stage.Status == run.StageStatusCreated && (stage.ExecutionID != "" || stage.ChildRunID != "") {
			out = append(out, stage)
		}
	}
	return st, out
}

// A trigger writes the run's first step in its own commit: the stages after the trigger are
// dispatched with it, and the waker is handed the run and those stages, so the scheduler starts
// them without stepping the run or reading it.
func TestATriggersCommitDispatchesTheFirstStages(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ctx := context.Background()
	var woken []run.Stage
	var wokenRun run.State
	h := commands.WithRunWaker(commands.New(env.Store), func(st run.State, dispatched []run.Stage) { wokenRun, woken = st, dispatched })
	wf, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: mustDef(t, `{"name": "fan",
		"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"},
			{"id": "c", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}, {"from": "t", "to": "b"}, {"from": "a", "to": "c"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID, Input: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	events, err := env.Store.ReadStream(ctx, commands.RunStream(runs[0].RunID), 0, 100)
	if err != nil || len(events) != 2 || events[0].Type != (run.Triggered{}).EventType() || events[1].Type != (run.StagesDispatched{}).EventType() {
		t.Fatalf("the run's stream: %v, %d events", err, len(events))
	}
	if events[0].Position.Commit != events[1].Position.Commit {
		t.Fatalf("trigger at %v, dispatch at %v: two commits", events[0].Position, events[1].Position)
	}
	if wokenRun.ID != runs[0].RunID || len(woken) != 2 || len(wokenRun.Stages) != 3 {
		t.Fatalf("woken with run %q (%d stages) and %d dispatched, want %s, 3 and 2", wokenRun.ID, len(wokenRun.Stages), len(woken), runs[0].RunID)
	}
	_, dispatched := triggerDispatched(t, h, runs[0].RunID)
	for i, st := range dispatched {
		if st.ID != woken[i].ID || st.ExecutionID != woken[i].ExecutionID {
			t.Fatalf("dispatched %+v, woken with %+v", dispatched, woken)
		}
	}
	// The scheduler's step of the run now decides nothing: the trigger did.
	if _, again, err := h.Workflows.StepRun(ctx, runs[0].RunID, nil); err != nil || len(again) != 0 {
		t.Fatalf("a step after the trigger dispatched %d: %v", len(again), err)
	}
}
