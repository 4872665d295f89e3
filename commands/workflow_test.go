package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/testenv"
)

// TestConcurrentCreatesOfOneNameMakeOneWorkflow: names are unique per workspace even when the
// creates race (the reservation holds the name while its workflow is being written).
func TestConcurrentCreatesOfOneNameMakeOneWorkflow(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 1)
	var d workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "Race", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// A handler each, as separate serve processes would have.
			_, errs[i] = commands.New(env.Store).Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws, Definition: d})
		})
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, domain.ErrConflict):
			t.Fatalf("create: %v", err)
		}
	}
	if created != 1 {
		t.Fatalf("%d workflows named Race were created, want 1", created)
	}
}

// Text jsonb cannot store is refused with the field named before anything is appended.
func TestUnstorableWorkflowTextIsRefusedBeforeAnyAppend(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 1)
	h := commands.New(env.Store)
	ctx := context.Background()
	var d workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "Text", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	field := func(err error) string {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			return ve.Field
		}
		return "no validation error: " + fmt.Sprint(err)
	}
	for _, input := range []string{`{"a": "\u0000"}`, `{"a": "\udc00"}`, "{\"a\": \"\xfe\"}"} {
		if runs, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID, Input: json.RawMessage(input)}); field(err) != "body" || len(runs) != 0 {
			t.Errorf("trigger with %q: %v %v", input, runs, err)
		}
	}
	name := "x\x00"
	if _, err := h.Workflows.UpdateComponent(ctx, ws, wf.ID, "t", workflow.ComponentPatch{Name: &name}); field(err) != "name" {
		t.Errorf("component name with NUL: %v", err)
	}
	if _, err := h.Workflows.UpdateComponent(ctx, ws, wf.ID, "t", workflow.ComponentPatch{Config: json.RawMessage(`{"a": "\u0000"}`)}); field(err) != "config" {
		t.Errorf("component config with NUL: %v", err)
	}
	bad := d
	bad.Components = []workflow.Component{{ID: "t", Module: workflow.ModuleTrigger, Config: json.RawMessage(`{"q": "\ud800"}`)}}
	if _, err := h.Workflows.UpdateWorkflow(ctx, ws, wf.ID, bad); !strings.HasSuffix(field(err), ".config") {
		t.Errorf("definition config with a lone surrogate: %v", err)
	}
	if got, err := h.Workflows.Workflow(ctx, ws, wf.ID); err != nil || got.Version != 1 {
		t.Fatalf("after the refusals the workflow is at version %d (%v), want 1", got.Version, err)
	}
}
