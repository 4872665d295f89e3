package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/testenv"
)

// mcpSession mints an MCP token of workspace ws and connects with it.
func mcpSession(t *testing.T, ctx context.Context, s *mcpStack, ws string) *mcp.ClientSession {
	t.Helper()
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.connect(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// list_schedules shows a workflow's ON_SCHEDULE component with its next fires; pause_schedule and
// resume_schedule flip paused; trigger_schedule starts a run now. Another workspace finds neither
// the workflow nor its schedule, and a missing or unknown argument is a tool error naming it.
func TestMCPScheduleTools(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := s.env.Workspace(t, 100)
	wf, err := s.env.Cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: workflow.Definition{Name: "hourly",
		Components: []workflow.Component{{ID: "tick", Module: workflow.ModuleOnSchedule, Config: json.RawMessage(`{"every": "1h", "input": {"n": 1}}`)},
			{ID: "echo", Module: "core.echo"}}, Edges: []workflow.Edge{{From: "tick", To: "echo"}}}})
	if err != nil {
		t.Fatal(err)
	}
	sess := mcpSession(t, ctx, s, ws)

	listed := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "list_schedules", Arguments: map[string]any{"workflowId": wf.ID}}))
	scheds, _ := listed["schedules"].([]any)
	if listed["workflowId"] != wf.ID || len(scheds) != 1 {
		t.Fatalf("list_schedules: %v", listed)
	}
	if sc := scheds[0].(map[string]any); sc["componentId"] != "tick" || sc["paused"] != false || len(sc["nextFires"].([]any)) != 10 {
		t.Fatalf("list_schedules' schedule: %v", sc)
	}
	target := map[string]any{"workflowId": wf.ID, "componentId": "tick"}
	if got := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "pause_schedule", Arguments: target})); got["paused"] != true {
		t.Fatalf("pause_schedule: %v", got)
	}
	listed = structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "list_schedules", Arguments: map[string]any{"workflowId": wf.ID}}))
	if listed["schedules"].([]any)[0].(map[string]any)["paused"] != true {
		t.Fatalf("list_schedules after pause: %v", listed)
	}
	if got := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "resume_schedule", Arguments: target})); got["paused"] != false {
		t.Fatalf("resume_schedule: %v", got)
	}
	started := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_schedule", Arguments: target}))
	runID, _ := started["runId"].(string)
	if runID == "" {
		t.Fatalf("trigger_schedule: %v", started)
	}
	var run map[string]any
	testenv.Eventually(t, time.Minute, "the triggered run to complete", func() bool {
		run = structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_run", Arguments: map[string]any{"runId": runID}}))
		return run["status"] == "COMPLETED"
	})
	if run["workflowId"] != wf.ID {
		t.Fatalf("the triggered run: %v", run)
	}

	for _, c := range []struct {
		tool, want string
		args       map[string]any
	}{
		{"list_schedules", "workflowId", map[string]any{}},
		{"pause_schedule", "componentId", map[string]any{"workflowId": wf.ID}},
		{"resume_schedule", "workflowId", map[string]any{"componentId": "tick"}},
		{"trigger_schedule", "cron", map[string]any{"workflowId": wf.ID, "componentId": "tick", "cron": "* * * * *"}},
		{"pause_schedule", "not found", map[string]any{"workflowId": wf.ID, "componentId": "echo"}},
	} {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		wantToolError(t, res, err, c.want)
	}

	other := mcpSession(t, ctx, s, s.env.Workspace(t, 10))
	res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "list_schedules", Arguments: map[string]any{"workflowId": wf.ID}})
	wantToolError(t, res, err, "workflow "+wf.ID+" not found")
	for _, tool := range []string{"pause_schedule", "resume_schedule", "trigger_schedule"} {
		res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: target})
		wantToolError(t, res, err, "not found")
	}
	// The other workspace's calls changed nothing.
	listed = structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "list_schedules", Arguments: map[string]any{"workflowId": wf.ID}}))
	if sc := listed["schedules"].([]any)[0].(map[string]any); sc["paused"] != false || sc["lastRunId"] != runID {
		t.Fatalf("the schedule after the other workspace's calls: %v", sc)
	}
}

// signal_run completes a run's stage waiting for the signal, once per id; another workspace's
// run is not found and a bad name or id is a tool error naming the field.
func TestMCPSignalRun(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := s.env.Workspace(t, 100)
	wf := workflowOf(t, s, ws, "paid", workflow.ModuleWait, `{"signal": {"name": "payment.cleared"}}`)
	runs, err := s.env.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf, Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	runID := runs[0].RunID
	testenv.Eventually(t, time.Minute, "the stage to wait for its signal", func() bool {
		st, err := s.env.Cmds.Workflows.Run(ctx, runID)
		if err != nil {
			return false
		}
		for _, stage := range st.Detail().RunStages {
			if stage.WaitingFor != nil {
				return true
			}
		}
		return false
	})
	sess := mcpSession(t, ctx, s, ws)

	for _, c := range []struct {
		want string
		args map[string]any
	}{
		{"runId", map[string]any{"name": "payment.cleared"}},
		{"name", map[string]any{"runId": runID}},
		{"name", map[string]any{"runId": runID, "name": strings.Repeat("n", 201)}},
		{"payload", map[string]any{"runId": runID, "name": "payment.cleared", "payload": map[string]any{"s": "\x00"}}},
		{"id", map[string]any{"runId": runID, "name": "payment.cleared", "id": ""}},
		{"signal", map[string]any{"runId": runID, "name": "payment.cleared", "signal": "x"}},
	} {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "signal_run", Arguments: c.args})
		wantToolError(t, res, err, c.want)
	}
	args := map[string]any{"runId": runID, "name": "payment.cleared", "id": "pay-1", "payload": map[string]any{"amount": 3}}
	other := mcpSession(t, ctx, s, s.env.Workspace(t, 10))
	res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "signal_run", Arguments: args})
	wantToolError(t, res, err, "run "+runID+" not found")

	got := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "signal_run", Arguments: args}))
	if done, _ := got["completedStages"].([]any); got["runId"] != runID || got["id"] != "pay-1" || got["duplicate"] != false || len(done) != 1 {
		t.Fatalf("signal_run: %v", got)
	}
	again := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "signal_run", Arguments: args}))
	if again["duplicate"] != true {
		t.Fatalf("signal_run again: %v", again)
	}
	var run map[string]any
	testenv.Eventually(t, time.Minute, "the signalled run to complete", func() bool {
		run = structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_run", Arguments: map[string]any{"runId": runID}}))
		return run["status"] == "COMPLETED"
	})
	for _, st := range run["runStages"].([]any) {
		if st := st.(map[string]any); st["module"] == workflow.ModuleWait && st["output"].(map[string]any)["amount"] != float64(3) {
			t.Fatalf("the WAIT stage's output: %v", st)
		}
	}
}
