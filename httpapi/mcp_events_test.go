package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
)

// send_event starts the runs of the workflows listening for the event, once per id; a bad name
// is a tool error naming the field.
func TestMCPSendEvent(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := s.env.Workspace(t, 100)
	st, err := s.env.Cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: workflow.Definition{Name: "paid",
		Components: []workflow.Component{{ID: "on", Module: workflow.ModuleOnEvent, Config: json.RawMessage(`{"name": "order.paid"}`)},
			{ID: "echo", Module: "core.echo"}}, Edges: []workflow.Edge{{From: "on", To: "echo"}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.env.CaughtUp(t, "eventtriggers")
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.connect(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	args := map[string]any{"name": "order.paid", "id": "o-1", "payload": map[string]any{"amount": 3}}
	first := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "send_event", Arguments: args}))
	runs, _ := first["runs"].([]any)
	if len(runs) != 1 || runs[0].(map[string]any)["workflowId"] != st.ID {
		t.Fatalf("send_event: %v", first)
	}
	again := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "send_event", Arguments: args}))
	if again["duplicate"] != true || again["eventId"] != first["eventId"] {
		t.Fatalf("send_event again: %v", again)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "send_event", Arguments: map[string]any{"name": "no spaces allowed"}})
	wantToolError(t, res, err, "name")
}
