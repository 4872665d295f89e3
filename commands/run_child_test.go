package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/testenv"
)

func mustDef(t *testing.T, js string) workflow.Definition {
	t.Helper()
	var d workflow.Definition
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func callDef(name, childID string) string {
	return fmt.Sprintf(`{"name": %q, "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "call", "module": "RUN_WORKFLOW", "config": {"workflowId": %q}}], "edges": [{"from": "t", "to": "call"}]}`, name, childID)
}

// Submitting a RUN_WORKFLOW stage again, from this process or another one (a scheduler that
// crashed after starting the child and steps the stage again), starts one child run.
func TestAChildRunStartsOnceHoweverOftenItsStageIsSubmitted(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 1)
	ctx := context.Background()
	h := commands.New(env.Store)
	child, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws,
		Definition: mustDef(t, `{"name": "child", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	parent, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: mustDef(t, callDef("parent", child.ID))})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: parent.ID, Input: json.RawMessage(`{"a": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	st, dispatched := triggerDispatched(t, h, runs[0].RunID)
	if len(dispatched) != 1 || dispatched[0].ChildRunID == "" {
		t.Fatalf("trigger: %+v", dispatched)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { errs[i] = commands.New(env.Store).Workflows.SubmitStage(ctx, &st, dispatched[0]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	events, err := env.Store.ReadStream(ctx, commands.RunStream(dispatched[0].ChildRunID), 0, 100)
	if err != nil || len(events) != 1 || events[0].Type != (run.Triggered{}).EventType() {
		t.Fatalf("the child's stream: %v, %d events", err, len(events))
	}
	got, err := h.Workflows.Run(ctx, dispatched[0].ChildRunID)
	if err != nil || got.ParentRunID != st.ID || got.ParentStageID != dispatched[0].ID || !sameJSON(got.Input, json.RawMessage(`{"a": 1}`)) {
		t.Fatalf("child %+v: %v", got, err)
	}
}

// Every way of saving a RUN_WORKFLOW refuses a workflow of another workspace, naming the field.
func TestRunWorkflowNamingAnotherWorkspacesWorkflowIsRefused(t *testing.T) {
	env := testenv.New(t)
	ws, other := env.Workspace(t, 1), env.Workspace(t, 1)
	ctx := context.Background()
	h := commands.New(env.Store)
	foreign, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: other,
		Definition: mustDef(t, `{"name": "theirs", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	own, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws,
		Definition: mustDef(t, `{"name": "ours", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	field := func(err error) string {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			return ve.Field
		}
		return fmt.Sprint("no validation error: ", err)
	}
	const want = `components[1] (component "call").config.workflowId`
	_, err = h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: mustDef(t, callDef("p", foreign.ID))})
	if field(err) != want {
		t.Errorf("create: %s", field(err))
	}
	if _, err = h.Workflows.UpdateWorkflow(ctx, ws, own.ID, mustDef(t, callDef("ours", foreign.ID))); field(err) != want {
		t.Errorf("update: %s", field(err))
	}
	caller, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: mustDef(t, callDef("caller", own.ID))})
	if err != nil {
		t.Fatal(err)
	}
	patch := workflow.ComponentPatch{Config: json.RawMessage(fmt.Sprintf(`{"workflowId": %q}`, foreign.ID))}
	if _, err = h.Workflows.UpdateComponent(ctx, ws, caller.ID, "call", patch); field(err) != "config.workflowId" {
		t.Errorf("component update: %s", field(err))
	}
}
