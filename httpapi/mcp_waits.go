package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

var signalRunSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","additionalProperties":false,"required":["runId","name"],
	"properties":{
	"runId":{"type":"string","description":"the run to signal, as trigger_workflow or get_run shows it"},
	"name":{"type":"string","minLength":1,"maxLength":%d,"description":"the signal's name, as the WAIT stage's config.signal.name gives it (e.g. payment.cleared)"},
	"payload":{"description":"the output of the stages the signal completes (null when omitted)"},
	"id":{"type":"string","minLength":1,"maxLength":%d,"description":"your id of the signal: sent again to the run it changes nothing (a new id when omitted)"}}}`,
	workflow.MaxSignalName, run.MaxSignalID))

// addWaitTools registers signal_run (POST /v1/sdk/workflows/executions/{runId}/signals).
func (m *MCP) addWaitTools(server *mcp.Server) {
	m.tool(server, &mcp.Tool{Name: "signal_run", Title: "Send a signal to a workflow run",
		Description: "Completes the run's WAIT stages waiting for the signal's name, with the payload as their output; " +
			"a signal that arrives before its stage waits is kept for the run (up to 100, deduplicated by id) and " +
			"consumed when one does. Returns {runId, id, duplicate, completedStages}; follow the run with get_run.",
		InputSchema: signalRunSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, m.signalRun)
}

func (m *MCP) signalRun(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a struct {
		RunID string `json:"runId"`
		SignalRequest
	}
	if err := decodeArguments(args, &a); err != nil {
		return nil, err
	}
	if a.RunID == "" {
		return nil, domain.Invalid("runId", "is required")
	}
	c, err := ParseSignal(a.SignalRequest)
	if err != nil {
		return nil, err
	}
	// Signal answers a run of another workspace as an unknown one.
	c.WorkspaceID, c.RunID = caller.WorkspaceID, a.RunID
	res, err := m.Cmds.Waits.Signal(ctx, c)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, toolErrorf("run %s not found", a.RunID)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
