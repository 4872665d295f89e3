package httpapi

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var sendEventSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["name"],
	"properties":{
	"name":{"type":"string","maxLength":200,"description":"the event's name, as ON_EVENT triggers' config.name gives it (e.g. order.paid)"},
	"payload":{"type":"object","description":"the event's payload: the started runs' trigger body ({} when omitted)"},
	"id":{"type":"string","maxLength":255,"description":"your id of the event: sent again within 24 hours it starts nothing and returns the first's runs"}}}`)

// addEventTools registers send_event.
func (m *MCP) addEventTools(server *mcp.Server) {
	m.tool(server, &mcp.Tool{Name: "send_event", Title: "Send an event to the workflows listening for it",
		Description: "Starts a run of every workflow of the workspace whose ON_EVENT trigger has the event's name and " +
			"whose filter holds for the payload (a debounced trigger gathers it into its key's run instead). Returns " +
			"{eventId, runs: [{workflowId, runId, debounced}], duplicate}; follow a run with get_run.",
		InputSchema: sendEventSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(true)},
	}, m.sendEvent)
}

func (m *MCP) sendEvent(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a EventRequest
	if err := decodeArguments(args, &a); err != nil {
		return nil, err
	}
	c, err := ParseEvent(a)
	if err != nil {
		return nil, err
	}
	c.WorkspaceID, c.Triggers = caller.WorkspaceID, m.Queries
	return m.Cmds.Events.SendEvent(ctx, c)
}
