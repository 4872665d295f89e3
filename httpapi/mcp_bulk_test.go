package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/reactors/bulks"
	"github.com/switchyard/switchyard/testenv"
)

// bulk_runs cancels a workflow's waiting runs in the background and get_bulk follows it; another
// workspace sees neither the workflow nor the bulk.
func TestMCPBulkTools(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	testenv.Go(t, bulks.New(s.env.Store, s.env.Cmds, s.env.Queries, bulks.Config{SweepInterval: 100 * time.Millisecond}).Run)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := s.env.Workspace(t, 100)
	slowWF := workflowOf(t, s, ws, "slow", "core.delay", `{"ms":10000}`)
	for range 3 {
		if _, err := s.env.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: slowWF, Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	s.env.CaughtUp(t, "runs")
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.connect(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	started := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "bulk_runs", Arguments: map[string]any{
		"workflowId": slowWF, "action": "cancel", "reason": "from mcp"}}))
	if started["matched"] != float64(3) || started["bulkId"] == "" {
		t.Fatalf("bulk_runs: %v", started)
	}
	var got map[string]any
	testenv.Eventually(t, time.Minute, "the bulk to complete", func() bool {
		got = structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_bulk", Arguments: map[string]any{"bulkId": started["bulkId"]}}))
		return got["status"] == "COMPLETED"
	})
	if got["done"] != float64(3) || got["failed"] != float64(0) || got["reason"] != "from mcp" {
		t.Fatalf("get_bulk: %v", got)
	}

	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "bulk_runs", Arguments: map[string]any{"workflowId": slowWF, "action": "pause"}})
	wantToolError(t, res, err, "action")
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "bulk_runs", Arguments: map[string]any{"workflowId": slowWF, "action": "rerun",
		"filter": map[string]any{"createdAfter": "2026-02-01T00:00:00Z", "createdBefore": "2026-01-01T00:00:00Z"}}})
	wantToolError(t, res, err, "filter.createdAfter")

	other := s.env.Workspace(t, 10)
	otherTok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: other})
	if err != nil {
		t.Fatal(err)
	}
	otherSess, err := s.connect(ctx, otherTok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer otherSess.Close()
	res, err = otherSess.CallTool(ctx, &mcp.CallToolParams{Name: "get_bulk", Arguments: map[string]any{"bulkId": started["bulkId"]}})
	wantToolError(t, res, err, "not found")
	res, err = otherSess.CallTool(ctx, &mcp.CallToolParams{Name: "bulk_runs", Arguments: map[string]any{"workflowId": slowWF, "action": "cancel"}})
	wantToolError(t, res, err, "not found")
}
