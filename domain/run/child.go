package run

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// MaxNesting bounds how deep child runs nest: a run triggered through the API is at depth 0,
// its children at 1; a RUN_WORKFLOW stage that would start a run deeper than this fails.
const MaxNesting = 5

// The error codes of a RUN_WORKFLOW stage.
const (
	CodeChildRunFailed   = "child_run_failed"
	CodeNestingTooDeep   = "nesting_too_deep"
	CodeCycle            = "cycle"
	CodeWorkflowNotFound = "workflow_not_found"
)

// ChildRunID is the id of the run a RUN_WORKFLOW stage starts in an attempt: derived, so that
// a scheduler that crashed after starting it and steps the stage again finds it there instead
// of starting a second one.
func ChildRunID(runID, stageID string, attempt int) string {
	return uuid.NewSHA1(idNamespace, fmt.Appendf(nil, "child/%s/%s/%d", runID, stageID, attempt)).String()
}

// stageOfFact finds the stage a fact is for: by execution, or by stage id for a fact about a
// child run, which only a RUN_WORKFLOW stage takes.
func (s *State) stageOfFact(f Fact) (Stage, bool) {
	if f.StageID == "" {
		return s.StageOfExecution(f.ExecutionID)
	}
	st, ok := s.Stage(f.StageID)
	return st, ok && st.ChildRunID != ""
}

// CheckChild tells whether stage st of parent may start a run of workflowID: not when that
// workflow is the parent's or one of its ancestors' (code cycle), nor when the child would
// nest deeper than MaxNesting (code nesting_too_deep). It returns the stage's failure, or nil.
// The chain of ancestors travels in each child's Triggered, so the check needs no other run.
func CheckChild(parent *State, st Stage, workflowID string) json.RawMessage {
	chain := parent.childChain()
	if slices.Contains(chain, workflowID) {
		return failure(CodeCycle, fmt.Sprintf("workflow %s is already running in this chain of runs (%d deep): a RUN_WORKFLOW cannot reach its own workflow", workflowID, len(chain)), st.ID)
	}
	if len(chain) > MaxNesting {
		return failure(CodeNestingTooDeep, fmt.Sprintf("a child run here would be %d deep; runs nest at most %d deep", len(chain), MaxNesting), st.ID)
	}
	return nil
}

// childChain is the Chain of parent's children: its ancestors' workflows and its own.
func (s *State) childChain() []string {
	return append(slices.Clone(s.Chain), s.WorkflowID)
}

// ChildTrigger is what starts a child run: the target workflow's definition and trigger.
type ChildTrigger struct {
	WorkflowID string
	TriggerID  string
	Definition workflow.Definition
	// ConcurrencyKey is what Definition's concurrency key gave for the stage's input.
	ConcurrencyKey string
}

// DecideChildTrigger starts the child run of RUN_WORKFLOW stage st of parent, with the stage's
// input as its trigger body; a child already started is domain.ErrAlreadyExists.
func DecideChildTrigger(s State, parent *State, st Stage, c ChildTrigger, when Condition, now time.Time) ([]domain.Event, error) {
	events, err := DecideTrigger(s, st.ChildRunID, parent.WorkspaceID, c.WorkflowID, parent.APIKeyID, c.TriggerID,
		c.Definition, parent.StageInput(st), c.ConcurrencyKey, when, now)
	if err != nil {
		return nil, err
	}
	t := events[0].(Triggered)
	t.ParentRunID, t.ParentStageID, t.Chain = parent.ID, st.ID, parent.childChain()
	return []domain.Event{t}, nil
}

// ChildFacts is what a child run tells its parent's RUN_WORKFLOW stage: started, and once it
// ended, its output (the stage costs nothing: the child's stages bill as usual) or a failure
// with code child_run_failed naming the child.
func ChildFacts(child *State) []Fact {
	if child.ParentRunID == "" {
		return nil
	}
	started := Fact{StageID: child.ParentStageID, Kind: FactStarted, Attempt: 1, At: child.CreatedAt}
	end := Fact{StageID: child.ParentStageID, Attempt: 1, At: child.UpdatedAt}
	switch child.Status {
	case StatusCompleted:
		end.Kind, end.Output = FactCompleted, child.Output()
	case StatusFailed:
		end.Kind, end.Error = FactFailed, childFailure(child)
	default:
		return []Fact{started}
	}
	return []Fact{started, end}
}

// ChildKeyFailure is the failure of a RUN_WORKFLOW stage whose input the child workflow's
// concurrency key cannot be evaluated over.
func ChildKeyFailure(st Stage, err error) json.RawMessage {
	return failure(CodeChildKey, fmt.Sprintf("the child workflow's concurrency key: %v", err), st.ID)
}

// CodeChildKey is the error code of a RUN_WORKFLOW stage whose child's concurrency key failed.
const CodeChildKey = "concurrency_key"

// ChildWorkflowGone is the failure of a RUN_WORKFLOW stage whose workflow was deleted after
// the parent's workflow was saved.
func ChildWorkflowGone(st Stage, workflowID string) json.RawMessage {
	return failure(CodeWorkflowNotFound, fmt.Sprintf("workflow %s no longer exists in this workspace", workflowID), st.ID)
}

func childFailure(child *State) json.RawMessage {
	var cause struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(child.Error, &cause)
	b, _ := json.Marshal(map[string]any{"code": CodeChildRunFailed, "stageId": child.ParentStageID,
		"message": fmt.Sprintf("child run %s failed (%s)", child.ID, cause.Code),
		"details": map[string]any{"runId": child.ID, "error": nullable(child.Error)}})
	return b
}

// OpenChildren lists the child runs of a run's RUN_WORKFLOW stages that had not completed when
// it ended: a run that FAILED (cancelled, timed out, another stage failed) cancels them.
func (s *State) OpenChildren() []string {
	var ids []string
	for _, st := range s.Stages {
		if st.ChildRunID != "" && st.Status != StageStatusCompleted {
			ids = append(ids, st.ChildRunID)
		}
	}
	return ids
}
