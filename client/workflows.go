package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// Run statuses (SPEC.md 2.4 and 2.6). A run reports RUNNING nowhere: its stages do.
const (
	RunStatusCreated   = "CREATED"
	RunStatusExecuting = "EXECUTING"
	// RunStatusCanceled is never sent by Switchyard (a canceled run ends FAILED with
	// cancelRequestedAt set) but another implementation of SPEC.md 2.6 may send it, so the
	// client treats it as terminal.
	RunStatusCanceled = "CANCELED"
)

// TriggeredRun is one entry of a trigger's answer (SPEC.md 4.5): one per ON_API_CALLED
// component of the workflow.
type TriggeredRun struct {
	RunID string `json:"runId"`
	JobID string `json:"jobId"`
}

// Run is a workflow run detail (SPEC.md 2.4).
type Run struct {
	ID                string     `json:"id"`
	WorkflowID        string     `json:"workflowId"`
	Status            string     `json:"status"`
	PendingStageCount int        `json:"pendingStageCount"`
	FailedStageCount  int        `json:"failedStageCount"`
	CancelRequestedAt *time.Time `json:"cancelRequestedAt"`
	CancelReason      *string    `json:"cancelReason"`
	TotalUsage        float64    `json:"totalUsage"`
	// Error is JSON null unless the run FAILED.
	Error json.RawMessage `json:"error"`
	// Output is JSON null until the run COMPLETED; then the outputs of the workflow's
	// components with no outgoing edge, keyed by component id.
	Output json.RawMessage `json:"output"`
	// ParentRunID and ParentStageID name the RUN_WORKFLOW stage that started a child run;
	// nil for a run triggered through the API.
	ParentRunID   *string `json:"parentRunId"`
	ParentStageID *string `json:"parentStageId"`
	// RerunOf is the run this one re-runs (RerunRun); nil for other runs.
	RerunOf   *string    `json:"rerunOf,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	RunStages []RunStage `json:"runStages"`
}

// Terminal reports whether the run has ended.
func (r *Run) Terminal() bool { return runTerminal(r.Status) }

// RunStage is a stage of a run (SPEC.md 2.5, with the stage's place in the workflow). The
// non-terminal stages of a stream event (SPEC.md 2.6) use the same type; they carry no output,
// error, creditUsage or name.
type RunStage struct {
	ID                    string          `json:"id"`
	Module                string          `json:"module"`
	Status                string          `json:"status"`
	Output                json.RawMessage `json:"output,omitempty"`
	Error                 json.RawMessage `json:"error,omitempty"`
	CreditUsage           float64         `json:"creditUsage"`
	ExecutionEventID      *string         `json:"executionEventId"`
	ExecutionDispatchedAt *time.Time      `json:"executionDispatchedAt"`
	// ExecutionAttempt is 1-based.
	ExecutionAttempt int `json:"executionAttempt"`
	// ReferenceID is the id of the workflow component the stage runs.
	ReferenceID string `json:"referenceId"`
	Name        string `json:"name,omitempty"`
	// Iteration is the FOR_EACH iteration index, -1 for a stage that is not an iteration.
	Iteration     int     `json:"iteration"`
	ParentStageID *string `json:"parentStageId"`
	// Skipped is true for a stage none of whose incoming edges was taken (an edge's `when`
	// was false): it completed without running, with output null and creditUsage 0.
	Skipped bool `json:"skipped,omitempty"`
	// Reused is true for a stage a re-run copied from the run it re-runs: it did not run,
	// creditUsage 0.
	Reused bool `json:"reused,omitempty"`
	// ChildRunID is the run a RUN_WORKFLOW stage started.
	ChildRunID *string   `json:"childRunId,omitempty"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// RunEvent is a run stream event (SPEC.md 2.6).
type RunEvent struct {
	ID     string         `json:"id"`
	Status string         `json:"status"`
	Output RunEventOutput `json:"output"`
	// Error is set on FAILED: why the run failed.
	Error     json.RawMessage `json:"error,omitempty"`
	Timestamp time.Time       `json:"timestamp"`
	// EventID is the SSE id of the message, to resume from with StreamOptions.LastEventID.
	EventID string `json:"-"`
}

// Terminal reports whether the event ends the stream: COMPLETED, FAILED, or the CANCELED
// that SPEC.md 2.6 asks clients to tolerate.
func (e *RunEvent) Terminal() bool { return runTerminal(e.Status) }

// Canceled reports whether the run ended because cancellation was requested.
func (e *RunEvent) Canceled() bool {
	return e.Status == RunStatusCanceled || (e.Status == StatusFailed && e.Output.CancelRequestedAt != nil)
}

func (e *RunEvent) setEventID(id string) { e.EventID = id }

// RunEventOutput is the output member of a run stream event; every member is optional.
type RunEventOutput struct {
	TotalUsage        float64    `json:"totalUsage"`
	PendingStageCount int        `json:"pendingStageCount"`
	FailedStageCount  int        `json:"failedStageCount"`
	CancelRequestedAt *time.Time `json:"cancelRequestedAt"`
	CancelReason      *string    `json:"cancelReason"`
	NonTerminalStages []RunStage `json:"nonTerminalStages"`
}

func runTerminal(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == RunStatusCanceled
}

// ComponentUpdate is the body of a component update (SPEC.md 4.8); unset fields are left as
// they are, and Config is merged into the existing config.
type ComponentUpdate struct {
	Config map[string]any `json:"config,omitempty"`
	Name   string         `json:"name,omitempty"`
	// Position is the canvas position [x, y].
	Position *[2]float64 `json:"position,omitempty"`
}

// ComponentSnapshot is a component after an update (SPEC.md 2.7).
type ComponentSnapshot struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Position  [2]float64      `json:"position"`
	Config    json.RawMessage `json:"config"`
	UpdatedAt time.Time       `json:"updatedAt"`
}

// WorkflowItem is a workflow list item (SPEC.md 2.9).
type WorkflowItem struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// TriggerWorkflow starts a run of the workflow (SPEC.md 4.5) with input as the trigger's input
// (any JSON object; nil sends no body). It returns one entry per ON_API_CALLED component.
func (c *Client) TriggerWorkflow(ctx context.Context, workflowID string, input any) ([]TriggeredRun, error) {
	var out []TriggeredRun
	if err := c.do(ctx, http.MethodPost, "/v1/sdk/workflows/"+url.PathEscape(workflowID), input, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetRun reads a workflow run (SPEC.md 4.6).
func (c *Client) GetRun(ctx context.Context, runID string) (*Run, error) {
	var out Run
	if err := c.do(ctx, http.MethodGet, "/v1/sdk/workflows/executions/"+url.PathEscape(runID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelRun requests the cancellation of a run and returns its detail, cancelRequestedAt set;
// the run then ends FAILED. reason may be empty. A run that already ended answers 409.
func (c *Client) CancelRun(ctx context.Context, runID, reason string) (*Run, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	var out Run
	if err := c.do(ctx, http.MethodPost, "/v1/sdk/workflows/executions/"+url.PathEscape(runID)+"/cancel", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rerun is what a re-run restarts; the zero value restarts at the stages that did not complete.
type Rerun struct {
	// FromStage is the component to restart at: it and what is downstream of it run again.
	FromStage string `json:"fromStage,omitempty"`
	// Input replaces the trigger body; without FromStage, the whole run runs again.
	Input any `json:"input,omitempty"`
	// Iteration, when set, restarts only that iteration of FromStage, a FOR_EACH.
	Iteration *int `json:"iteration,omitempty"`
}

// RerunRun starts a new run of an ended run's definition, copying the stages completed
// upstream of the restart point (docs/workflows.md, "Re-running a run"). A run that has not
// ended answers 409.
func (c *Client) RerunRun(ctx context.Context, runID string, r Rerun) (TriggeredRun, error) {
	var out TriggeredRun
	err := c.do(ctx, http.MethodPost, "/v1/sdk/workflows/executions/"+url.PathEscape(runID)+"/rerun", r, &out)
	return out, err
}

// UpdateComponent changes a workflow component's config, name or canvas position (SPEC.md 4.8).
func (c *Client) UpdateComponent(ctx context.Context, workflowID, componentID string, u ComponentUpdate) (*ComponentSnapshot, error) {
	var out ComponentSnapshot
	path := "/v1/sdk/workflows/" + url.PathEscape(workflowID) + "/components/" + url.PathEscape(componentID)
	if err := c.do(ctx, http.MethodPost, path, u, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWorkflows lists the workflows the key may use (page from 1, limit up to 100; 0 takes the
// server's default).
func (c *Client) ListWorkflows(ctx context.Context, page, limit int) (*Page[WorkflowItem], error) {
	var out Page[WorkflowItem]
	if err := c.do(ctx, http.MethodGet, "/v1/sdk/workflows"+pageQuery(page, limit), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StreamRun follows a run's stream (SPEC.md 4.7) with the reconnection of StreamExecution: it
// yields each update and stops after the terminal one (COMPLETED, FAILED, or CANCELED).
func (c *Client) StreamRun(ctx context.Context, runID string, opts *StreamOptions) iter.Seq2[*RunEvent, error] {
	return follow[RunEvent](c, ctx, "/v1/sdk/workflows/executions/"+url.PathEscape(runID)+"/stream", opts)
}

// WaitForRun follows the run's stream until it ends and returns the terminal event. When the
// timeout (default 60000 ms) passes first the error is ErrTimeout, "Execution timed out".
func (c *Client) WaitForRun(ctx context.Context, runID string, opts *WaitOptions) (*RunEvent, error) {
	return waitFor(ctx, opts, func(wctx context.Context, so *StreamOptions) iter.Seq2[*RunEvent, error] {
		return c.StreamRun(wctx, runID, so)
	})
}
