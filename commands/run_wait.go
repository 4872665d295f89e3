package commands

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/modules"
)

// runEval is what the run decisions evaluate through commands: edges' conditions and WAIT
// stages' until expressions.
func runEval(ctx context.Context) run.Eval {
	return run.Eval{When: edgeCondition(ctx), Until: untilTime(ctx)}
}

// untilTime evaluates a WAIT's until expression over the stage's input.
func untilTime(ctx context.Context) run.Until {
	return func(src string, input json.RawMessage) (time.Time, error) {
		x, err := payloadExpressions.get(src)
		if err != nil {
			return time.Time{}, err
		}
		t, err := x.EvalTime(ctx, input)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return t, fmt.Errorf("%w: %v", run.ErrEvaluationTimedOut, err)
		}
		return t, err
	}
}

// checkUntil compiles a WAIT's until expression; the message says what does not compile.
func checkUntil(src string) error {
	_, err := modules.CompilePayloadExpression("until", src)
	var ve *modules.ValidationError
	if errors.As(err, &ve) {
		return errors.New(ve.Message)
	}
	return err
}

// SignalRun is a signal sent to a run (POST /v1/sdk/workflows/executions/{runId}/signals).
type SignalRun struct {
	WorkspaceID string
	RunID       string
	Name        string
	// ID deduplicates: a second signal with an id the run has received changes nothing. Empty
	// gets a new id.
	ID      string
	Payload json.RawMessage
}

// SignalResult is what a signal did.
type SignalResult struct {
	RunID string `json:"runId"`
	ID    string `json:"id"`
	// Duplicate: the run had received a signal with this id already; nothing changed.
	Duplicate bool `json:"duplicate"`
	// Completed lists the stages the signal completed; empty when the run keeps it for a stage
	// that does not wait yet.
	Completed []string `json:"completedStages"`
}

// Signal completes the stages of a run waiting for the signal's name with its payload, or
// keeps it on the run for the first that will wait for it. A run of another workspace is
// domain.ErrNotFound.
func (h *Waits) Signal(ctx context.Context, c SignalRun) (SignalResult, error) {
	if c.ID == "" {
		c.ID = uuid.NewString()
	}
	if err := domain.CheckStorableJSON("payload", c.Payload); err != nil {
		return SignalResult{}, err
	}
	if _, err := h.runOf(ctx, c.WorkspaceID, c.RunID); err != nil {
		return SignalResult{}, err
	}
	res := SignalResult{RunID: c.RunID, ID: c.ID, Completed: []string{}}
	var dispatched []run.Stage
	st, _, err := executeFold(ctx, h, RunStream(c.RunID), runAgg, func(s run.State) ([]domain.Event, error) {
		events, d, err := run.DecideSignal(s, run.Signal{Name: c.Name, ID: c.ID, Payload: c.Payload}, runEval(ctx), h.now())
		dispatched, res.Duplicate, res.Completed = d, err == nil && len(events) == 0, []string{}
		for _, e := range events {
			if sc, ok := e.(run.StageCompleted); ok && sc.SignalID == c.ID {
				res.Completed = append(res.Completed, sc.StageID)
			}
		}
		return events, err
	})
	if err != nil {
		return res, err
	}
	if !st.Exists {
		return res, fmt.Errorf("run %s: %w", c.RunID, domain.ErrNotFound)
	}
	return res, h.submitAll(ctx, &st, dispatched)
}

// submitAll submits the executions of stages a decision dispatched (the scheduler would only
// find them at its next sweep).
func (h *Waits) submitAll(ctx context.Context, st *run.State, stages []run.Stage) error {
	for _, stage := range stages {
		if err := h.workflows.SubmitStage(ctx, st, stage); err != nil {
			return err
		}
	}
	return nil
}

func (h *Waits) runOf(ctx context.Context, workspaceID, runID string) (run.State, error) {
	st, err := h.workflows.Run(ctx, runID)
	if err != nil {
		return st, err
	}
	if workspaceID != "" && st.WorkspaceID != workspaceID {
		return run.State{}, fmt.Errorf("run %s: %w", runID, domain.ErrNotFound)
	}
	return st, nil
}

// DecideApproval is a decision on an approval stage.
type DecideApproval struct {
	// WorkspaceID, when set, must be the run's (the console's check); an approval URL names
	// its run and stage itself.
	WorkspaceID string
	RunID       string
	StageID     string
	Approved    bool
	By          string
	Comment     string
}

// Approve completes an approval stage with {"approved", "by", "comment"} once: a decided stage
// is domain.ErrConflict.
func (h *Waits) Approve(ctx context.Context, c DecideApproval) (run.State, error) {
	if _, err := h.runOf(ctx, c.WorkspaceID, c.RunID); err != nil {
		return run.State{}, err
	}
	var dispatched []run.Stage
	st, _, err := executeFold(ctx, h, RunStream(c.RunID), runAgg, func(s run.State) ([]domain.Event, error) {
		events, d, err := run.DecideApproval(s, c.StageID,
			run.Approval{Approved: c.Approved, By: strings.TrimSpace(c.By), Comment: strings.TrimSpace(c.Comment)}, runEval(ctx), h.now())
		dispatched = d
		return events, err
	})
	if err != nil {
		return st, err
	}
	return st, h.submitAll(ctx, &st, dispatched)
}

// approvalPurpose separates approval URLs' MACs from any other use of the sealer's MAC keys.
const approvalPurpose = "approval-url"

// ApprovalToken is the signed token of a stage's approval URL: its run and stage, and an
// HMAC of both under a key derived from SWITCHYARD_SECRET_KEY. Nothing of it is stored: it is
// derived again when the stage is shown and checked when used; once the stage is decided the
// token decides nothing more (single use, by the run's own record).
func (h *Waits) ApprovalToken(runID, stageID string) (string, error) {
	if h.sealer == nil {
		return "", errors.New("approval url: no sealer configured")
	}
	sum := h.sealer.MAC(approvalPurpose, []byte(runID+"/"+stageID))
	return runID + "." + stageID + "." + base64.RawURLEncoding.EncodeToString(sum), nil
}

// ApprovalURL is the approval URL of a stage: the base URL, /approvals/ and its token.
func (h *Waits) ApprovalURL(runID, stageID string) string {
	tok, err := h.ApprovalToken(runID, stageID)
	if err != nil {
		return ""
	}
	base := h.baseURL
	if base == "" {
		base = "http://localhost:8080"
	}
	return strings.TrimRight(base, "/") + "/approvals/" + tok
}

// OpenApprovalToken checks a token's signature in constant time and returns the run and stage
// it names; a token that does not verify is domain.ErrNotFound (it says nothing of why).
func (h *Waits) OpenApprovalToken(token string) (runID, stageID string, err error) {
	parts := strings.Split(token, ".")
	notFound := fmt.Errorf("approval: %w", domain.ErrNotFound)
	if len(parts) != 3 || h.sealer == nil || len(token) > 200 {
		return "", "", notFound
	}
	sum, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !h.sealer.VerifyMAC(approvalPurpose, []byte(parts[0]+"/"+parts[1]), sum) {
		return "", "", notFound
	}
	return parts[0], parts[1], nil
}

// RunDetail renders a run for the API and the console: State.Detail with each approval
// stage's approvalUrl, which the log does not hold.
func (h *Waits) RunDetail(st *run.State) run.Detail {
	d := st.Detail()
	for i := range d.RunStages {
		if w := d.RunStages[i].WaitingFor; w != nil && w.Kind == workflow.WaitApproval {
			w.ApprovalURL = h.ApprovalURL(st.ID, d.RunStages[i].ID)
		}
	}
	return d
}
