package client

import (
	"context"
	"encoding/json"
	"fmt"
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
	RerunOf *string `json:"rerunOf,omitempty"`
	// ConcurrencyKey is the run's key when its workflow has a concurrency; nil otherwise.
	ConcurrencyKey *string `json:"concurrencyKey,omitempty"`
	// WaitingFor is set while a CREATED run waits for a slot of its concurrency key.
	WaitingFor *RunWaitingFor `json:"waitingFor,omitempty"`
	CreatedAt  time.Time      `json:"createdAt"`
	UpdatedAt  time.Time      `json:"updatedAt"`
	RunStages  []RunStage     `json:"runStages"`
}

// RunWaitingFor says what a CREATED run waits for: a slot of its concurrency key, at most
// Limit runs of which run at once.
type RunWaitingFor struct {
	ConcurrencyKey string `json:"concurrencyKey"`
	Limit          int    `json:"limit"`
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

// TriggerOption sets an optional part of a trigger.
type TriggerOption func(*triggerOptions)

type triggerOptions struct{ idempotencyKey string }

// WithTriggerIdempotencyKey sends key as the trigger's Idempotency-Key header, on every
// attempt: for 24 hours a trigger of the same workflow with the same key and body answers the
// runs of the first instead of starting new ones (docs/workflows.md, "Idempotency-Key on a
// trigger"), so a trigger the client retries after a 502 or 503 starts its runs once. The same
// key with another body answers 409.
func WithTriggerIdempotencyKey(key string) TriggerOption {
	return func(o *triggerOptions) { o.idempotencyKey = key }
}

// TriggerWorkflow starts a run of the workflow (SPEC.md 4.5) with input as the trigger's input
// (any JSON object; nil sends no body). It returns one entry per ON_API_CALLED component.
func (c *Client) TriggerWorkflow(ctx context.Context, workflowID string, input any, opts ...TriggerOption) ([]TriggeredRun, error) {
	var o triggerOptions
	for _, opt := range opts {
		opt(&o)
	}
	var header http.Header
	if o.idempotencyKey != "" {
		header = http.Header{"Idempotency-Key": {o.idempotencyKey}}
	}
	var out []TriggeredRun
	if err := c.doWith(ctx, http.MethodPost, "/v1/sdk/workflows/"+url.PathEscape(workflowID), header, input, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ReplayRunCallback sends the run's workflow.run.terminal webhook to its definition's notify
// again (docs/webhooks.md) and returns the run detail. A run not ended, or whose definition
// has no notify, answers 409.
func (c *Client) ReplayRunCallback(ctx context.Context, runID string) (*Run, error) {
	var out Run
	if err := c.do(ctx, http.MethodPost, "/v1/sdk/workflows/executions/"+url.PathEscape(runID)+"/replay-callback", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
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

// Bulk actions (docs/workflows.md, "Bulk actions").
const (
	BulkActionCancel = "cancel"
	BulkActionRerun  = "rerun"
)

// BulkRequest is a bulk action on the runs of a workflow.
type BulkRequest struct {
	// Action is BulkActionCancel or BulkActionRerun.
	Action string     `json:"action"`
	Filter BulkFilter `json:"filter"`
	// Reason is a cancel's reason, recorded on each run (at most 1000 characters).
	Reason string `json:"reason,omitempty"`
}

// BulkFilter selects the runs of a bulk action; empty fields do not narrow. Without Status a
// cancel takes the runs not ended and a re-run the FAILED ones.
type BulkFilter struct {
	Status        string     `json:"status,omitempty"`
	CreatedAfter  *time.Time `json:"createdAfter,omitempty"`
	CreatedBefore *time.Time `json:"createdBefore,omitempty"`
}

// BulkAccepted answers a bulk action: its id and the runs it matched (at most 10000).
type BulkAccepted struct {
	BulkID  string `json:"bulkId"`
	Matched int    `json:"matched"`
}

// Bulk is a bulk action's progress.
type Bulk struct {
	ID         string     `json:"id"`
	WorkflowID string     `json:"workflowId"`
	Action     string     `json:"action"`
	Filter     BulkFilter `json:"filter"`
	Reason     string     `json:"reason,omitempty"`
	// Status is CREATED, RUNNING, then COMPLETED once every matched run is done or failed.
	Status  string `json:"status"`
	Matched int    `json:"matched"`
	Done    int    `json:"done"`
	Failed  int    `json:"failed"`
	// Failures are the first 100 runs the bulk could not act on, with why.
	Failures    []BulkFailure `json:"failures"`
	CreatedAt   time.Time     `json:"createdAt"`
	UpdatedAt   time.Time     `json:"updatedAt"`
	CompletedAt *time.Time    `json:"completedAt"`
}

// BulkFailure is a run a bulk action could not act on.
type BulkFailure struct {
	RunID string `json:"runId"`
	Error string `json:"error"`
}

// Completed reports whether the bulk has acted on (or failed) every run it matched.
func (b *Bulk) Completed() bool { return b.Status == StatusCompleted }

// BulkRuns cancels or re-runs the runs of a workflow that r's filter matches, in the
// background; BulkStatus follows it. A filter matching more than 10000 runs answers 400. It
// is sent once, never retried: a retry after a lost answer would start a second bulk.
func (c *Client) BulkRuns(ctx context.Context, workflowID string, r BulkRequest) (BulkAccepted, error) {
	var out BulkAccepted
	payload, err := json.Marshal(r)
	if err != nil {
		return out, fmt.Errorf("client: encode request: %w", err)
	}
	err = c.once(ctx, http.MethodPost, "/v1/sdk/workflows/"+url.PathEscape(workflowID)+"/runs/bulk", nil, payload, &out)
	return out, err
}

// BulkStatus reads a bulk action's progress.
func (c *Client) BulkStatus(ctx context.Context, bulkID string) (*Bulk, error) {
	var out Bulk
	if err := c.do(ctx, http.MethodGet, "/v1/sdk/workflows/bulk/"+url.PathEscape(bulkID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
