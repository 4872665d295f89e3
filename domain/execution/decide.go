package execution

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/retry"
)

// ErrNotClaimable means another worker holds or finished the execution; the caller moves on.
var ErrNotClaimable = errors.New("execution not claimable")

// ErrLeaseLost means the worker's claim was taken over or the execution already ended: its
// late result must not be recorded.
var ErrLeaseLost = errors.New("execution lease lost")

// Submit is a validated submit command.
type Submit struct {
	ExecutionID string
	WorkspaceID string
	APIKeyID    string
	Module      string
	Input       json.RawMessage
	Config      json.RawMessage
	Attempts    int
	CostMilli   int64
	Callback    Callback
	CachedFrom  string
	RunID       string
	StageID     string
	// Retry is a run stage's policy (normalized); Attempts must then be its attempts.
	Retry *retry.Policy
	// TimeoutMs bounds each attempt of a run stage (0, or MinTimeoutMs to MaxTimeoutMs).
	TimeoutMs int64
	// Transport is a workspace module's (nil for a built-in): Submitted.Transport.
	Transport *Transport
	Runner    string
}

// Bounds of an attempt's timeoutMs.
const (
	MinTimeoutMs = 100
	MaxTimeoutMs = 3_600_000
)

// CheckTimeout refuses an attempt timeout out of range, naming field.
func CheckTimeout(field string, ms int64) error {
	if ms != 0 && (ms < MinTimeoutMs || ms > MaxTimeoutMs) {
		return domain.Invalid(field, "must be from %d to %d milliseconds", MinTimeoutMs, MaxTimeoutMs)
	}
	return nil
}

// CheckAttempts refuses an attempts count out of range, naming the field: the one rule of a
// submit's attempts, which commands checks before anything of the submit is written.
func CheckAttempts(n int) error {
	if n < MinAttempts || n > MaxAttempts {
		return domain.Invalid("attempts", "must be an integer from %d to %d", MinAttempts, MaxAttempts)
	}
	return nil
}

// DecideSubmit accepts a new execution.
func DecideSubmit(s State, c Submit, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if err := checkRetry(c); err != nil {
		return nil, err
	}
	if err := CheckTimeout("timeoutMs", c.TimeoutMs); err != nil {
		return nil, err
	}
	if c.Module == "" {
		return nil, domain.Invalid("module", "is required")
	}
	if c.CostMilli < 0 {
		return nil, domain.Invalid("module", "has a negative cost")
	}
	return []domain.Event{Submitted{ExecutionID: c.ExecutionID, WorkspaceID: c.WorkspaceID, APIKeyID: c.APIKeyID,
		Module: c.Module, Input: c.Input, Config: c.Config, Attempts: c.Attempts, CostMilli: c.CostMilli,
		Callback: c.Callback, CachedFrom: c.CachedFrom, RunID: c.RunID, StageID: c.StageID, Retry: c.Retry, TimeoutMs: c.TimeoutMs, Transport: c.Transport, Runner: c.Runner, At: now.UTC()}}, nil
}

// checkRetry checks a submit's attempts: 1 to 3 as SPEC.md 4.1 has them, or those of the
// stage's retry policy (1 to 10), which the policy must state.
func checkRetry(c Submit) error {
	if c.Retry == nil {
		return CheckAttempts(c.Attempts)
	}
	if err := c.Retry.Validate("retry"); err != nil {
		return err
	}
	if c.Attempts != c.Retry.Attempts {
		return domain.Invalid("attempts", "must equal retry.attempts (%d)", c.Retry.Attempts)
	}
	return nil
}

// DecideStart claims the execution for worker until now+lease.
func DecideStart(s State, worker string, lease time.Duration, now time.Time) ([]domain.Event, error) {
	if !s.Claimable(now) {
		return nil, ErrNotClaimable
	}
	return []domain.Event{Started{ExecutionID: s.ID, RunID: s.RunID, Attempt: s.NextAttempt(), Worker: worker,
		LeaseUntil: now.Add(lease).UTC(), At: now.UTC()}}, nil
}

// holds reports whether worker's claim of attempt is still the current one.
func (s State) holds(worker string, attempt int) bool {
	return s.Status == StatusRunning && s.RetryAt.IsZero() && s.Worker == worker && s.Attempt == attempt
}

// DecideComplete records the output of worker's attempt, billed usage.
func DecideComplete(s State, worker string, attempt int, output json.RawMessage, usage billing.Credits, now time.Time) ([]domain.Event, error) {
	if !s.holds(worker, attempt) {
		return nil, ErrLeaseLost
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	return []domain.Event{Completed{ExecutionID: s.ID, RunID: s.RunID, Attempt: attempt, Output: output, TotalUsage: usage,
		NoCallback: s.Callback.URL == "", At: now.UTC()}}, nil
}

// DecideCompleteFirst records the output of a call its accepting instance ran before anything
// of it was written (commands.Runner.RunFirst): the completion follows the submit directly,
// in the same append that creates the stream, so no other worker can have claimed it and
// no claim is recorded (SPEC.md 3: CREATED goes to COMPLETED on completion). Only the runner
// the submit names may decide it, and only for the first attempt.
func DecideCompleteFirst(s State, worker string, output json.RawMessage, usage billing.Credits, now time.Time) ([]domain.Event, error) {
	if !s.Exists || s.Status != StatusCreated || s.Attempt != 0 || s.Runner == "" || s.Runner != worker {
		return nil, ErrNotClaimable
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	return []domain.Event{Completed{ExecutionID: s.ID, RunID: s.RunID, Attempt: 1, Output: output, TotalUsage: usage,
		NoCallback: s.Callback.URL == "", At: now.UTC()}}, nil
}

// DecideFail records a failed attempt: retried at now+backoff while attempts remain (and
// again is true), otherwise the execution fails for good. An execution with a retry policy
// waits the policy's delay instead of backoff, and is not retried after a failure whose code
// the policy names non-retryable.
func DecideFail(s State, worker string, attempt int, failure json.RawMessage, again bool, backoff time.Duration, now time.Time) ([]domain.Event, error) {
	if !s.holds(worker, attempt) {
		return nil, ErrLeaseLost
	}
	if s.Retry != nil {
		again = again && s.Retry.Retryable(failure)
		backoff = s.Retry.Delay(attempt + 1)
	}
	if again && attempt < s.Attempts {
		return []domain.Event{AttemptFailed{ExecutionID: s.ID, Attempt: attempt, Error: failure, RetryAt: now.Add(backoff).UTC(), At: now.UTC()}}, nil
	}
	return []domain.Event{Failed{ExecutionID: s.ID, RunID: s.RunID, Attempt: attempt, Error: failure,
		NoCallback: s.Callback.URL == "", At: now.UTC()}}, nil
}
