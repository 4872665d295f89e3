package run

import (
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/domain/billing"
)

// StageView is a run stage as SPEC.md 2.5 shows it, with the 2.6 members that place it.
type StageView struct {
	ID                    string          `json:"id"`
	ReferenceID           string          `json:"referenceId"`
	Name                  string          `json:"name"`
	Module                string          `json:"module"`
	Status                StageStatus     `json:"status"`
	Output                json.RawMessage `json:"output"`
	Error                 json.RawMessage `json:"error"`
	CreditUsage           billing.Credits `json:"creditUsage"`
	Iteration             int             `json:"iteration"`
	ParentStageID         *string         `json:"parentStageId"`
	ExecutionEventID      *string         `json:"executionEventId"`
	ExecutionDispatchedAt *time.Time      `json:"executionDispatchedAt"`
	ExecutionAttempt      int             `json:"executionAttempt"`
	// Skipped: none of the stage's incoming edges was taken; it completed without running.
	Skipped bool `json:"skipped"`
	// Reused: a re-run copied the stage, with creditUsage 0, from the run it re-runs.
	Reused bool `json:"reused"`
	// ChildRunID is the run a RUN_WORKFLOW stage started; null for other stages.
	ChildRunID *string `json:"childRunId"`
	// WaitingFor is what a RUNNING WAIT stage waits for; null for other stages and once it
	// ends (docs/workflows.md "Waits, signals and approvals").
	WaitingFor *WaitingFor `json:"waitingFor"`
	UpdatedAt  time.Time   `json:"updatedAt"`
}

// Detail is the workflow run detail of SPEC.md 2.4.
type Detail struct {
	ID                string          `json:"id"`
	WorkflowID        string          `json:"workflowId"`
	Status            Status          `json:"status"`
	PendingStageCount int             `json:"pendingStageCount"`
	FailedStageCount  int             `json:"failedStageCount"`
	CancelRequestedAt *time.Time      `json:"cancelRequestedAt"`
	CancelReason      *string         `json:"cancelReason"`
	TotalUsage        billing.Credits `json:"totalUsage"`
	Error             json.RawMessage `json:"error"`
	// Output is the run's output once COMPLETED (State.Output), null before.
	Output json.RawMessage `json:"output"`
	// ParentRunID and ParentStageID name the RUN_WORKFLOW stage that started a child run;
	// null for a run triggered through the API.
	ParentRunID   *string `json:"parentRunId"`
	ParentStageID *string `json:"parentStageId"`
	// RerunOf is the run this one re-runs; null for other runs.
	RerunOf *string `json:"rerunOf"`
	// WaitingFor says why a CREATED run has not started: it waits for a slot of its
	// concurrency key. Absent once it started, and for runs without concurrency.
	WaitingFor     *RunWaitingFor `json:"waitingFor,omitempty"`
	ConcurrencyKey *string        `json:"concurrencyKey,omitempty"`
	CreatedAt      time.Time      `json:"createdAt"`
	UpdatedAt      time.Time      `json:"updatedAt"`
	RunStages      []StageView    `json:"runStages"`
}

// Detail renders the run for GET /v1/sdk/workflows/executions/:runId.
func (s *State) Detail() Detail {
	d := Detail{ID: s.ID, WorkflowID: s.WorkflowID, Status: s.Status, PendingStageCount: s.Pending,
		FailedStageCount: s.FailedStages(), TotalUsage: s.TotalUsage, Error: nullable(s.Error), CreatedAt: s.CreatedAt,
		UpdatedAt: s.UpdatedAt, RunStages: make([]StageView, len(s.Stages)), Output: s.Output()}
	d.CancelRequestedAt, d.CancelReason = s.cancellation()
	if s.ParentRunID != "" {
		parent, stage := s.ParentRunID, s.ParentStageID
		d.ParentRunID, d.ParentStageID = &parent, &stage
	}
	if s.RerunOf != "" {
		of := s.RerunOf
		d.RerunOf = &of
	}
	for i, st := range s.Stages {
		d.RunStages[i] = st.View()
	}
	if s.QueueID != "" {
		key := s.ConcurrencyKey
		d.ConcurrencyKey = &key
		if s.Waiting() {
			d.WaitingFor = &RunWaitingFor{ConcurrencyKey: key, Limit: s.Definition.Concurrency.Limit}
		}
	}
	return d
}

// RunWaitingFor is what a run waits for before it starts (a stage's is WaitingFor).
type RunWaitingFor struct {
	// ConcurrencyKey is the run's key: Limit runs of it are in flight, and the run waits its
	// turn behind them and the runs of the key triggered before it.
	ConcurrencyKey string `json:"concurrencyKey"`
	Limit          int    `json:"limit"`
}

func (s *State) cancellation() (*time.Time, *string) {
	if s.CancelAt.IsZero() {
		return nil, nil
	}
	at, reason := s.CancelAt, s.CancelReason
	if reason == "" {
		return &at, nil
	}
	return &at, &reason
}

// View renders a stage.
func (st Stage) View() StageView {
	v := StageView{ID: st.ID, ReferenceID: st.ComponentID, Name: st.Name, Module: st.Module, Status: st.Status,
		Output: nullable(st.Output), Error: nullable(st.Error), CreditUsage: st.CreditUsage, Iteration: st.Iteration,
		ExecutionAttempt: st.Attempt, Skipped: st.Skipped, Reused: st.Reused, UpdatedAt: st.UpdatedAt}
	if st.ParentStageID != "" {
		p := st.ParentStageID
		v.ParentStageID = &p
	}
	if st.ChildRunID != "" {
		v.ChildRunID = &st.ChildRunID
	}
	if st.Waiting != nil && !st.Status.Terminal() {
		w := *st.Waiting
		v.WaitingFor = &w
	}
	if st.ExecutionID != "" {
		id, at := st.ExecutionID, st.DispatchedAt
		v.ExecutionEventID, v.ExecutionDispatchedAt = &id, &at
	}
	return v
}

// NonTerminalStage is a stage still open, as a run stream event lists it (SPEC.md 2.6).
type NonTerminalStage struct {
	ID                    string      `json:"id"`
	Module                string      `json:"module"`
	Status                StageStatus `json:"status"`
	ReferenceID           string      `json:"referenceId"`
	Iteration             int         `json:"iteration"`
	ParentStageID         *string     `json:"parentStageId"`
	ExecutionEventID      *string     `json:"executionEventId"`
	ExecutionDispatchedAt *time.Time  `json:"executionDispatchedAt"`
	ExecutionAttempt      int         `json:"executionAttempt"`
	// WaitingFor is what a waiting WAIT stage waits for (StageView.WaitingFor).
	WaitingFor *WaitingFor `json:"waitingFor,omitempty"`
	UpdatedAt  time.Time   `json:"updatedAt"`
}

// StreamOutput is the output member of a run stream event.
type StreamOutput struct {
	TotalUsage        billing.Credits    `json:"totalUsage"`
	PendingStageCount int                `json:"pendingStageCount"`
	FailedStageCount  int                `json:"failedStageCount"`
	CancelRequestedAt *time.Time         `json:"cancelRequestedAt"`
	CancelReason      *string            `json:"cancelReason"`
	NonTerminalStages []NonTerminalStage `json:"nonTerminalStages"`
}

// StreamEvent is a run stream event (SPEC.md 2.6); Error is set on FAILED.
type StreamEvent struct {
	ID        string           `json:"id"`
	Status    Status           `json:"status"`
	Output    StreamOutput     `json:"output"`
	Error     *json.RawMessage `json:"error,omitempty"`
	Timestamp time.Time        `json:"timestamp"`
}

// StreamEvent renders the run's current state as a stream event.
func (s *State) StreamEvent() StreamEvent {
	e := StreamEvent{ID: s.ID, Status: s.Status, Timestamp: s.UpdatedAt, Output: StreamOutput{TotalUsage: s.TotalUsage,
		PendingStageCount: s.Pending, FailedStageCount: s.FailedStages(), NonTerminalStages: []NonTerminalStage{}}}
	e.Output.CancelRequestedAt, e.Output.CancelReason = s.cancellation()
	if s.Status == StatusFailed {
		err := nullable(s.Error)
		e.Error = &err
	}
	if s.Status.Terminal() {
		return e
	}
	for _, st := range s.Stages {
		if st.Status.Terminal() {
			continue
		}
		v := st.View()
		e.Output.NonTerminalStages = append(e.Output.NonTerminalStages, NonTerminalStage{ID: v.ID, Module: v.Module,
			Status: v.Status, ReferenceID: v.ReferenceID, Iteration: v.Iteration, ParentStageID: v.ParentStageID,
			ExecutionEventID: v.ExecutionEventID, ExecutionDispatchedAt: v.ExecutionDispatchedAt,
			ExecutionAttempt: v.ExecutionAttempt, WaitingFor: v.WaitingFor, UpdatedAt: v.UpdatedAt})
	}
	return e
}

func nullable(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
