package httpapi

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
)

var (
	listSchedulesSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["workflowId"],
		"properties":{"workflowId":{"type":"string","description":"id of the workflow whose ON_SCHEDULE components to list, as list_workflows shows it"}}}`)

	scheduleSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["workflowId","componentId"],
		"properties":{"workflowId":{"type":"string","description":"id of the workflow, as list_workflows shows it"},
		"componentId":{"type":"string","description":"id of the ON_SCHEDULE component, as list_schedules shows it"}}}`)
)

// addScheduleTools registers the tools of GET /v1/sdk/workflows/{id}/schedules and its pause,
// resume and trigger routes (docs/workflows.md, "Schedules").
func (m *MCP) addScheduleTools(server *mcp.Server) {
	m.tool(server, &mcp.Tool{Name: "list_schedules", Title: "List a workflow's schedules",
		Description: "Lists the ON_SCHEDULE components of a workflow: componentId, name, cron or every, timezone, " +
			"overlap, catchUp, paused, lastRunId and nextFires (the next 10 fire times, paused or not). Returns " +
			"{workflowId, schedules}.",
		InputSchema: listSchedulesSchema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, m.listSchedules)
	m.tool(server, &mcp.Tool{Name: "pause_schedule", Title: "Pause a schedule",
		Description: "Stops an ON_SCHEDULE component firing until resume_schedule; pausing a paused one changes " +
			"nothing. Runs already started go on. Returns the schedule as list_schedules shows it.",
		InputSchema: scheduleSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, m.pauseSchedule)
	m.tool(server, &mcp.Tool{Name: "resume_schedule", Title: "Resume a schedule",
		Description: "Has a paused ON_SCHEDULE component fire again from its next fire time: the fires due while it " +
			"was paused do not run. Returns the schedule as list_schedules shows it.",
		InputSchema: scheduleSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, m.resumeSchedule)
	m.tool(server, &mcp.Tool{Name: "trigger_schedule", Title: "Fire a schedule now",
		Description: "Starts one run of the workflow from an ON_SCHEDULE component now, with the schedule's input, " +
			"whatever its fire times, overlap policy or pause. Returns {runId, jobId}; follow the run with get_run.",
		InputSchema: scheduleSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)},
	}, m.triggerSchedule)
}

func (m *MCP) listSchedules(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a struct {
		WorkflowID string `json:"workflowId"`
	}
	if err := decodeArguments(args, &a); err != nil {
		return nil, err
	}
	if a.WorkflowID == "" {
		return nil, domain.Invalid("workflowId", "is required")
	}
	views, err := m.Cmds.Schedules.Schedules(ctx, caller.WorkspaceID, a.WorkflowID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, toolErrorf("workflow %s not found", a.WorkflowID)
	}
	if err != nil {
		return nil, err
	}
	return Schedules{WorkflowID: a.WorkflowID, Schedules: views}, nil
}

// scheduleArguments are the arguments of the tools acting on one schedule.
type scheduleArguments struct {
	WorkflowID  string `json:"workflowId"`
	ComponentID string `json:"componentId"`
}

func readScheduleArguments(args json.RawMessage) (scheduleArguments, error) {
	var a scheduleArguments
	if err := decodeArguments(args, &a); err != nil {
		return a, err
	}
	if a.WorkflowID == "" {
		return a, domain.Invalid("workflowId", "is required")
	}
	if a.ComponentID == "" {
		return a, domain.Invalid("componentId", "is required: the id of the ON_SCHEDULE component")
	}
	return a, nil
}

// scheduleError answers a missing workflow or schedule component as the REST routes do.
func scheduleError(a scheduleArguments, err error) error {
	if errors.Is(err, domain.ErrNotFound) {
		return toolErrorf("workflow %s or its schedule component %s not found", a.WorkflowID, a.ComponentID)
	}
	return err
}

func (m *MCP) pauseSchedule(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	return m.changeSchedule(ctx, caller, args, m.Cmds.Schedules.PauseSchedule)
}

func (m *MCP) resumeSchedule(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	return m.changeSchedule(ctx, caller, args, m.Cmds.Schedules.ResumeSchedule)
}

func (m *MCP) changeSchedule(ctx context.Context, caller mcpCaller, args json.RawMessage,
	change func(ctx context.Context, workspaceID, workflowID, componentID string) (commands.ScheduleView, error)) (any, error) {
	a, err := readScheduleArguments(args)
	if err != nil {
		return nil, err
	}
	v, err := change(ctx, caller.WorkspaceID, a.WorkflowID, a.ComponentID)
	if err != nil {
		return nil, scheduleError(a, err)
	}
	return v, nil
}

func (m *MCP) triggerSchedule(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	a, err := readScheduleArguments(args)
	if err != nil {
		return nil, err
	}
	// No API key asked: the token's id is in the events' metadata (source mcp:<id>).
	started, err := m.Cmds.Schedules.TriggerSchedule(ctx, caller.WorkspaceID, a.WorkflowID, a.ComponentID, "")
	if err != nil {
		return nil, scheduleError(a, err)
	}
	return started, nil
}
