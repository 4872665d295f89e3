package run_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

const parentDef = `{"name": "parent", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "call", "module": "RUN_WORKFLOW", "config": {"workflowId": "wf-child"}},
	{"id": "after", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "call", "mapping": {"n": "x"}}, {"from": "call", "to": "after"}]}`

const childDef = `{"name": "child", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "double", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "double"}]}`

// startChildOf starts the child of the parent's one dispatched RUN_WORKFLOW stage.
func startChildOf(t *testing.T, parent *harness, d workflow.Definition) (*harness, run.Stage) {
	t.Helper()
	dispatched := parent.step()
	if len(dispatched) != 1 || dispatched[0].ChildRunID == "" || dispatched[0].ExecutionID != "" {
		t.Fatalf("dispatched %+v, want the RUN_WORKFLOW stage with a child run and no execution", dispatched)
	}
	st := dispatched[0]
	if want := run.ChildRunID("run-1", st.ID, 1); st.ChildRunID != want {
		t.Fatalf("child run id %s, want the derived %s", st.ChildRunID, want)
	}
	events, err := run.DecideChildTrigger(run.State{}, &parent.s, st, run.ChildTrigger{WorkflowID: "wf-child", TriggerID: "t", Definition: d}, cond, t0)
	if err != nil {
		t.Fatal(err)
	}
	child := &harness{t: t, at: t0}
	child.apply(events)
	return child, st
}

func TestAChildRunCompletesItsParentStageWithItsOutput(t *testing.T) {
	parent := start(t, def(t, parentDef), `{"x": 4}`)
	child, st := startChildOf(t, parent, def(t, childDef))
	if child.s.ParentRunID != "run-1" || child.s.ParentStageID != st.ID || string(child.s.Input) != `{"n":4}` {
		t.Fatalf("child: parent %q stage %q input %s", child.s.ParentRunID, child.s.ParentStageID, child.s.Input)
	}
	if det := child.s.Detail(); det.ParentRunID == nil || *det.ParentRunID != "run-1" || *det.ParentStageID != st.ID {
		t.Fatalf("child detail does not name its parent: %+v", det)
	}
	parent.step(run.ChildFacts(&child.s)...)
	if got, _ := parent.s.Stage(st.ID); got.Status != run.StageStatusRunning {
		t.Fatalf("stage %s after the child started, want RUNNING", got.Status)
	}
	child.echoAll()
	d := parent.step(run.ChildFacts(&child.s)...)
	got, _ := parent.s.Stage(st.ID)
	if got.Status != run.StageStatusCompleted || string(got.Output) != `{"double":{"n":4}}` || got.CreditUsage != 0 {
		t.Fatalf("stage %s output %s usage %v, want COMPLETED with the child's output and no usage", got.Status, got.Output, got.CreditUsage)
	}
	if v := got.View(); v.ChildRunID == nil || *v.ChildRunID != child.s.ID {
		t.Fatalf("the stage does not name its child: %+v", v)
	}
	if len(d) != 1 || parent.inputOf(d[0]) != `{"double":{"n":4}}` {
		t.Fatalf("downstream of the child: %+v", d)
	}
}

func TestAFailedChildFailsItsParentStage(t *testing.T) {
	parent := start(t, def(t, parentDef), `{"x": 4}`)
	child, st := startChildOf(t, parent, def(t, childDef))
	d := child.step()
	child.step(run.Fact{ExecutionID: d[0].ExecutionID, Kind: run.FactFailed, Error: json.RawMessage(`{"code":"boom"}`), At: t0})
	if child.s.Status != run.StatusFailed {
		t.Fatalf("child %s", child.s.Status)
	}
	parent.step(run.ChildFacts(&child.s)...)
	got, _ := parent.s.Stage(st.ID)
	var f struct {
		Code    string
		Details struct{ RunID string }
	}
	_ = json.Unmarshal(got.Error, &f)
	if got.Status != run.StageStatusFailed || f.Code != run.CodeChildRunFailed || f.Details.RunID != child.s.ID {
		t.Fatalf("stage %s error %s, want child_run_failed naming %s", got.Status, got.Error, child.s.ID)
	}
	if parent.s.Status != run.StatusFailed {
		t.Fatalf("parent %s, want FAILED", parent.s.Status)
	}
}

// A fact naming a stage by id only moves a RUN_WORKFLOW stage, never a module stage.
func TestAStageFactOnlyMovesAChildStage(t *testing.T) {
	h := start(t, def(t, linear), `{}`)
	d := h.step()
	h.step(run.Fact{StageID: d[0].ID, Kind: run.FactCompleted, Output: json.RawMessage(`1`), At: t0})
	if got, _ := h.s.Stage(d[0].ID); got.Status.Terminal() {
		t.Fatalf("a module stage took a stage fact: %s", got.Status)
	}
}

func TestCheckChildRefusesCyclesAndDeepNesting(t *testing.T) {
	parent := start(t, def(t, parentDef), `{}`)
	st := parent.step()[0]
	if f := run.CheckChild(&parent.s, st, "wf"); !strings.Contains(string(f), `"code":"cycle"`) {
		t.Fatalf("a run of its own workflow: %s, want cycle", f)
	}
	if f := run.CheckChild(&parent.s, st, "wf-child"); f != nil {
		t.Fatalf("a first child: %s", f)
	}
	deep := parent.s
	deep.Chain = []string{"a", "b", "c", "d"} // the parent is at depth 4: its child at 5
	if f := run.CheckChild(&deep, st, "wf-child"); f != nil {
		t.Fatalf("a child at depth 5: %s", f)
	}
	deep.Chain = append(deep.Chain, "e")
	if f := run.CheckChild(&deep, st, "wf-child"); !strings.Contains(string(f), `"code":"nesting_too_deep"`) {
		t.Fatalf("a child at depth 6: %s, want nesting_too_deep", f)
	}
}
