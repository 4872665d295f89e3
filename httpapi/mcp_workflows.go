package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/projections"
)

// MaxRunWaitMs bounds trigger_workflow's waitForMs. A run has several stages, so it may wait
// longer than a component's 15 s; past this the model follows the run with get_run.
const MaxRunWaitMs = 60000

// mcpMaxCancelReason bounds cancel_run's reason, which is stored in the run's events.
const mcpMaxCancelReason = 1000

var (
	listWorkflowsSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` + pageProperties + `}}`)

	triggerWorkflowSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","additionalProperties":false,"required":["workflowId"],
		"properties":{
		"workflowId":{"type":"string","description":"id of the workflow to run, as list_workflows shows it"},
		"input":{"type":"object","description":"what the workflow's ON_API_CALLED trigger outputs to the first stages ({} when omitted)"},
		"waitForMs":{"type":"integer","minimum":0,"maximum":%d,"default":0,"description":"wait up to this many milliseconds for the runs to end; 0 returns at once (then use get_run)"}}}`,
		MaxRunWaitMs))

	runIDSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["runId"],
		"properties":{"runId":{"type":"string","description":"the run id trigger_workflow returned"}}}`)

	cancelRunSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","additionalProperties":false,"required":["runId"],
		"properties":{"runId":{"type":"string","description":"the run id trigger_workflow returned"},
		"reason":{"type":"string","maxLength":%d,"description":"why, recorded as the run's cancelReason"}}}`, mcpMaxCancelReason))

	bulkRunsSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","additionalProperties":false,"required":["workflowId","action"],
		"properties":{"workflowId":{"type":"string","description":"id of the workflow whose runs to act on"},
		"action":{"type":"string","enum":["cancel","rerun"],"description":"cancel each run, or re-run each from its failed stages"},
		"filter":{"type":"object","additionalProperties":false,"properties":{
			"status":{"type":"string","enum":["CREATED","EXECUTING","COMPLETED","FAILED"],"description":"default: runs not ended for cancel, FAILED for rerun"},
			"createdAfter":{"type":"string","format":"date-time"},"createdBefore":{"type":"string","format":"date-time"}}},
		"reason":{"type":"string","maxLength":%d,"description":"a cancel's reason, recorded on each run"}}}`, mcpMaxCancelReason))

	bulkIDSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["bulkId"],
		"properties":{"bulkId":{"type":"string","description":"the bulk id bulk_runs returned"}}}`)
)

// addWorkflowTools registers the workflow tools.
func (m *MCP) addWorkflowTools(server *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}
	m.tool(server, &mcp.Tool{Name: "list_workflows", Title: "List workflows",
		Description: "Lists the workspace's workflows, newest first: id, name, createdAt. Paginated: returns " +
			"{data, total, page, totalPages}.",
		InputSchema: listWorkflowsSchema, Annotations: readOnly,
	}, m.listWorkflows)
	m.tool(server, &mcp.Tool{Name: "trigger_workflow", Title: "Run a workflow",
		Description: "Starts a run of a workflow for each of its ON_API_CALLED triggers (usually one), billed stage by " +
			"stage. Returns {runs: [{runId, jobId, run}]}, where run is the run detail: status (CREATED, EXECUTING, " +
			"COMPLETED, FAILED), pendingStageCount, failedStageCount, cancelRequestedAt, cancelReason, totalUsage and " +
			"runStages with each stage's module, status, output and error. With waitForMs it waits for the runs to end.",
		InputSchema: triggerWorkflowSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)},
	}, m.triggerWorkflow)
	m.tool(server, &mcp.Tool{Name: "get_run", Title: "Get a workflow run",
		Description: "Returns the current detail of a workflow run of this workspace: status, stage counts, credits " +
			"used and every stage with its output or error.",
		InputSchema: runIDSchema, Annotations: readOnly,
	}, m.getRun)
	m.tool(server, &mcp.Tool{Name: "cancel_run", Title: "Cancel a workflow run",
		Description: "Cancels a workflow run that has not ended: it ends FAILED with cancelRequestedAt set (there is no " +
			"separate canceled status). Returns the run detail.",
		InputSchema: cancelRunSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, m.cancelRun)
	m.tool(server, &mcp.Tool{Name: "bulk_runs", Title: "Cancel or re-run many workflow runs",
		Description: "Cancels or re-runs the runs of a workflow that a filter (status, createdAfter, createdBefore) " +
			"matches, at most 10000, in the background. Returns {bulkId, matched}; follow it with get_bulk.",
		InputSchema: bulkRunsSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)},
	}, m.bulkRuns)
	m.tool(server, &mcp.Tool{Name: "get_bulk", Title: "Get a bulk action's progress",
		Description: "Returns a bulk action of bulk_runs: status (CREATED, RUNNING, COMPLETED), matched, done, failed " +
			"and the first failures with why.",
		InputSchema: bulkIDSchema, Annotations: readOnly,
	}, m.getBulk)
}

func (m *MCP) bulkRuns(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a struct {
		WorkflowID string `json:"workflowId"`
		BulkRequest
	}
	if err := decodeArguments(args, &a); err != nil {
		return nil, err
	}
	if a.WorkflowID == "" {
		return nil, domain.Invalid("workflowId", "is required")
	}
	c, err := ParseBulk(a.BulkRequest)
	if err != nil {
		return nil, err
	}
	c.WorkspaceID, c.WorkflowID, c.Runs = caller.WorkspaceID, a.WorkflowID, m.Queries
	st, err := m.Cmds.Bulks.StartBulk(ctx, c)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, toolErrorf("workflow %s not found", a.WorkflowID)
	}
	if err != nil {
		return nil, err
	}
	return BulkAccepted{BulkID: st.ID, Matched: len(st.RunIDs)}, nil
}

func (m *MCP) getBulk(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a struct {
		BulkID string `json:"bulkId"`
	}
	if err := decodeArguments(args, &a); err != nil {
		return nil, err
	}
	if a.BulkID == "" {
		return nil, domain.Invalid("bulkId", "is required")
	}
	st, err := m.Cmds.Bulks.Bulk(ctx, a.BulkID)
	if err == nil && st.WorkspaceID != caller.WorkspaceID {
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		return nil, toolErrorf("bulk %s not found", a.BulkID)
	}
	if err != nil {
		return nil, err
	}
	return st.Detail(), nil
}

func (m *MCP) listWorkflows(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	p, err := pageArguments(args)
	if err != nil {
		return nil, err
	}
	list, total, err := m.Queries.WorkflowsOf(ctx, caller.WorkspaceID, p)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []projections.WorkflowListItem{}
	}
	return PageBody[projections.WorkflowListItem]{Data: list, Total: total, Page: p.Page, TotalPages: p.TotalPages(total)}, nil
}

// triggeredRun is one entry of trigger_workflow's answer: SPEC.md 4.5's runId and jobId, and
// the run's detail (SPEC.md 2.4) when the call returned.
type triggeredRun struct {
	RunID string     `json:"runId"`
	JobID string     `json:"jobId"`
	Run   run.Detail `json:"run"`
}

func (m *MCP) triggerWorkflow(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a struct {
		WorkflowID string          `json:"workflowId"`
		Input      json.RawMessage `json:"input"`
		WaitForMs  *int            `json:"waitForMs"`
	}
	if err := decodeArguments(args, &a); err != nil {
		return nil, err
	}
	if a.WorkflowID == "" {
		return nil, domain.Invalid("workflowId", "is required")
	}
	input := json.RawMessage(`{}`)
	if !isNull(a.Input) {
		var err error
		if input, err = requiredObject(map[string]json.RawMessage{"input": a.Input}, "input"); err != nil {
			return nil, err
		}
	}
	wait := 0
	if a.WaitForMs != nil {
		if *a.WaitForMs < 0 || *a.WaitForMs > MaxRunWaitMs {
			return nil, domain.Invalid("waitForMs", "must be an integer from 0 to %d", MaxRunWaitMs)
		}
		wait = *a.WaitForMs
	}
	runs, err := m.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: caller.WorkspaceID, WorkflowID: a.WorkflowID, Input: input})
	if errors.Is(err, domain.ErrNotFound) {
		return nil, toolErrorf("workflow %s not found", a.WorkflowID)
	}
	if err != nil {
		return nil, err
	}
	// All runs share one deadline: waitForMs bounds the whole call.
	wctx, cancel := context.WithTimeout(ctx, time.Duration(wait)*time.Millisecond)
	defer cancel()
	out := make([]triggeredRun, 0, len(runs))
	for _, r := range runs {
		st, err := m.waitRun(wctx, ctx, r.RunID, wait > 0)
		if err != nil {
			return nil, err
		}
		out = append(out, triggeredRun{RunID: r.RunID, JobID: r.JobID, Run: st.Detail()})
	}
	return map[string]any{"runs": out}, nil
}

// waitRun returns the run's state once it has ended or wctx does (at once without wait): the
// live hub wakes it on every event of the run's stream. ctx, which outlives wctx, reads the
// final state.
func (m *MCP) waitRun(wctx, ctx context.Context, id string, wait bool) (*run.State, error) {
	var st run.State
	if wait {
		_ = m.Hub.Until(wctx, commands.RunStream(id), time.Second, func() (bool, error) {
			cur, err := m.Cmds.Workflows.Run(wctx, id)
			if err != nil {
				return false, err
			}
			st = cur
			return cur.Status.Terminal(), nil
		})
		if st.Exists {
			return &st, nil
		}
	}
	st, err := m.Cmds.Workflows.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// ownRun loads a run of the caller's workspace; another workspace's run is answered as an
// unknown one.
func (m *MCP) ownRun(ctx context.Context, caller mcpCaller, args json.RawMessage, into any, id *string) (*run.State, error) {
	if err := decodeArguments(args, into); err != nil {
		return nil, err
	}
	if *id == "" {
		return nil, domain.Invalid("runId", "is required")
	}
	st, err := m.Cmds.Workflows.Run(ctx, *id)
	if err == nil && st.WorkspaceID != caller.WorkspaceID {
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		return nil, toolErrorf("run %s not found", *id)
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func (m *MCP) getRun(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a struct {
		RunID string `json:"runId"`
	}
	st, err := m.ownRun(ctx, caller, args, &a, &a.RunID)
	if err != nil {
		return nil, err
	}
	return st.Detail(), nil
}

func (m *MCP) cancelRun(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a struct {
		RunID  string `json:"runId"`
		Reason string `json:"reason"`
	}
	cur, err := m.ownRun(ctx, caller, args, &a, &a.RunID)
	if err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(a.Reason) > mcpMaxCancelReason {
		return nil, domain.Invalid("reason", "must be at most %d characters", mcpMaxCancelReason)
	}
	st, err := m.Cmds.Workflows.CancelRun(ctx, a.RunID, a.Reason)
	if errors.Is(err, domain.ErrConflict) {
		return nil, toolErrorf("run %s has already ended (%s)", a.RunID, cur.Status)
	}
	if err != nil {
		return nil, err
	}
	return st.Detail(), nil
}
