// Package run is the workflow run aggregate (SPEC.md 2.4 to 2.6, 3): a run started by one
// ON_API_CALLED trigger of a workflow, with the copy of the definition it started with, and
// its stages: one per component reached, one per component and item inside a FOR_EACH.
// Module stages run through the executor as component executions; the scheduler records
// their progress here and decides what runs next.
package run

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Category is the stream category of runs: run-<id>.
const Category = "run"

// Status is a run's state (SPEC.md 2.4).
type Status string

// The run statuses.
const (
	StatusCreated   Status = "CREATED"
	StatusExecuting Status = "EXECUTING"
	StatusCompleted Status = "COMPLETED"
	StatusFailed    Status = "FAILED"
)

// Terminal reports whether the run has ended.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusFailed }

// StageStatus is a stage's state (SPEC.md 2.5).
type StageStatus string

// The stage statuses.
const (
	StageStatusCreated   StageStatus = "CREATED"
	StageStatusRunning   StageStatus = "RUNNING"
	StageStatusCompleted StageStatus = "COMPLETED"
	StageStatusFailed    StageStatus = "FAILED"
)

// Terminal reports whether the stage has ended.
func (s StageStatus) Terminal() bool { return s == StageStatusCompleted || s == StageStatusFailed }

// NoIteration is the iteration of a stage outside any FOR_EACH (SPEC.md 2.6).
const NoIteration = -1

var idNamespace = uuid.MustParse("0b0a3c2e-55d4-4b8e-9b7e-6a3e1f0c9d21")

// StageID is the id of the stage of component in iteration of a run: derived, so that every
// scheduler deciding the same stage names it the same.
func StageID(runID, componentID string, iteration int) string {
	return uuid.NewSHA1(idNamespace, fmt.Appendf(nil, "%s/%s/%d", runID, componentID, iteration)).String()
}

// ExecutionID is the id of the component execution that runs a stage.
func ExecutionID(stageID string) string {
	return uuid.NewSHA1(idNamespace, []byte("execution/"+stageID)).String()
}

// Triggered records a new run: the trigger stage is complete at once, with the request body
// as its output.
type Triggered struct {
	RunID       string              `json:"runId"`
	WorkflowID  string              `json:"workflowId"`
	WorkspaceID string              `json:"workspaceId"`
	APIKeyID    string              `json:"apiKeyId,omitempty"`
	TriggerID   string              `json:"triggerId"`
	Definition  workflow.Definition `json:"definition"`
	Input       json.RawMessage     `json:"input"`
	// Conditions holds what the `when` of each conditional edge out of the trigger gave, by
	// downstream component (Condition).
	Conditions map[string]bool `json:"conditions,omitempty"`
	// ParentRunID and ParentStageID name the RUN_WORKFLOW stage that started a child run;
	// Chain is the workflow ids of its ancestors, root first (CheckChild reads it).
	ParentRunID   string   `json:"parentRunId,omitempty"`
	ParentStageID string   `json:"parentStageId,omitempty"`
	Chain         []string `json:"chain,omitempty"`
	// RerunOf is the run this one re-runs; Reused the stages it copied from it, COMPLETED at
	// once without running (DecideRerun).
	RerunOf string  `json:"rerunOf,omitempty"`
	Reused  []Reuse `json:"reused,omitempty"`
	// ConcurrencyKey is what the definition's concurrency key gave for Input, evaluated once
	// here (as Conditions are); set only when the definition has a concurrency. The run then
	// waits CREATED until its queue admits it (queue.go).
	ConcurrencyKey string    `json:"concurrencyKey,omitempty"`
	At             time.Time `json:"at"`
}

// EventType names the event in the log.
func (Triggered) EventType() string { return "RunTriggered" }

// Admitted records that the run's concurrency queue gave it a slot: it may start.
type Admitted struct {
	RunID   string    `json:"runId"`
	QueueID string    `json:"queueId"`
	At      time.Time `json:"at"`
}

// EventType names the event in the log.
func (Admitted) EventType() string { return "RunAdmitted" }

// Dispatch is one stage created by StagesDispatched.
type Dispatch struct {
	StageID       string `json:"stageId"`
	ComponentID   string `json:"componentId"`
	Iteration     int    `json:"iteration"`
	ParentStageID string `json:"parentStageId,omitempty"`
	// ExecutionID is the execution running a module stage; empty for a FOR_EACH or a skipped
	// stage.
	ExecutionID string `json:"executionId,omitempty"`
	// Skipped marks a stage none of whose incoming edges was taken: it is COMPLETED at once,
	// with output null and no usage, and nothing runs.
	Skipped bool `json:"skipped,omitempty"`
	// ChildRunID is the run a RUN_WORKFLOW stage starts (ChildRunID).
	ChildRunID string `json:"childRunId,omitempty"`
}

// StagesDispatched records stages whose upstream completed. A module stage's execution is
// submitted after this is written; a FOR_EACH stage starts iterating at once.
type StagesDispatched struct {
	RunID  string     `json:"runId"`
	Stages []Dispatch `json:"stages"`
	At     time.Time  `json:"at"`
}

// EventType names the event in the log.
func (StagesDispatched) EventType() string { return "RunStagesDispatched" }

// StageStarted records that an attempt of a stage's execution started.
type StageStarted struct {
	RunID   string    `json:"runId"`
	StageID string    `json:"stageId"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
}

// EventType names the event in the log.
func (StageStarted) EventType() string { return "RunStageStarted" }

// StageCompleted records a stage's output and the credits it used.
type StageCompleted struct {
	RunID       string          `json:"runId"`
	StageID     string          `json:"stageId"`
	Output      json.RawMessage `json:"output"`
	CreditUsage billing.Credits `json:"creditUsage"`
	// Conditions holds what the `when` of each conditional edge out of the stage gave for
	// Output, by downstream component (Condition).
	Conditions map[string]bool `json:"conditions,omitempty"`
	// Wait says what ended a WAIT stage ("time", "signal", "approval", "timeout"); SignalID
	// names the signal whose payload is Output.
	Wait     string `json:"wait,omitempty"`
	SignalID string `json:"signalId,omitempty"`
	// Attempt is the attempt that ended, when its StageStarted was left out for being
	// written with this event (startsInEnds); 0 otherwise.
	Attempt int       `json:"attempt,omitempty"`
	At      time.Time `json:"at"`
	// Then is the dispatch that this end led to in the same step, written inside it rather
	// than as an event of its own (dispatchesInEnds): the fold applies it after the end.
	Then *StagesDispatched `json:"then,omitempty"`
}

// EventType names the event in the log.
func (StageCompleted) EventType() string { return "RunStageCompleted" }

// StageFailed records a stage that failed after its attempts.
type StageFailed struct {
	RunID   string          `json:"runId"`
	StageID string          `json:"stageId"`
	Error   json.RawMessage `json:"error"`
	// Wait is "timeout" for a WAIT stage that timed out with onTimeout "fail".
	Wait string `json:"wait,omitempty"`
	// Attempt is as StageCompleted's.
	Attempt int       `json:"attempt,omitempty"`
	At      time.Time `json:"at"`
}

// EventType names the event in the log.
func (StageFailed) EventType() string { return "RunStageFailed" }

// CancelRequested records a cancellation (SPEC.md 3); Finished follows in the same append.
type CancelRequested struct {
	RunID  string    `json:"runId"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// EventType names the event in the log.
func (CancelRequested) EventType() string { return "RunCancelRequested" }

// Finished records the end of a run. Stages still open are closed FAILED with Abort.
type Finished struct {
	RunID  string          `json:"runId"`
	Status Status          `json:"status"`
	Error  json.RawMessage `json:"error,omitempty"`
	Abort  json.RawMessage `json:"abort,omitempty"`
	// QueueID is the concurrency queue the run held a slot in, or waited in: its end frees
	// that slot (queue.go). Empty for a run without concurrency.
	QueueID string    `json:"queueId,omitempty"`
	At      time.Time `json:"at"`
}

// EventType names the event in the log.
func (Finished) EventType() string { return "RunFinished" }

func init() {
	domain.Events.Register(Triggered{}, StagesDispatched{}, StageStarted{}, StageCompleted{}, StageFailed{},
		CancelRequested{}, Finished{}, Admitted{})
}
