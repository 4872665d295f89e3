// Package execution is the component execution aggregate (SPEC.md 2.1 to 2.3): a module call
// submitted over the SDK, claimed and run by an executor with a lease, retried up to its
// attempts, and finished COMPLETED (with output and the credits billed) or FAILED.
package execution

import (
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/retry"
)

// Category is the stream category of executions: execution-<id>.
const Category = "execution"

// Status is an execution's state as SPEC.md 2.1 names it.
type Status string

// The statuses of SPEC.md 2.1.
const (
	StatusCreated   Status = "CREATED"
	StatusRunning   Status = "RUNNING"
	StatusCompleted Status = "COMPLETED"
	StatusFailed    Status = "FAILED"
)

// Terminal reports whether no further change can happen.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusFailed }

// Limits of a submit (SPEC.md 4.1, 8).
const (
	MinAttempts   = 1
	MaxAttempts   = 3
	MaxWaitForMs  = 15000
	maxHeaderPair = 20
)

// Callback is where and how the terminal webhook is delivered. Secret and header values are
// sealed (package seal) before they enter an event; HeaderNames are kept in the clear because
// SPEC.md 2.2 shows them.
type Callback struct {
	URL           string   `json:"url,omitempty"`
	SealedSecret  string   `json:"sealedSecret,omitempty"`
	SealedHeaders string   `json:"sealedHeaders,omitempty"`
	HeaderNames   []string `json:"headerNames,omitempty"`
}

// Signed reports whether deliveries carry an HMAC signature.
func (c Callback) Signed() bool { return c.SealedSecret != "" }

// Transport says how an attempt of a workspace module (issue 28) reaches the user's code. A
// built-in module has none: the executor runs it in-process.
type Transport struct {
	// Type is TransportWorker (a worker leases the attempt by long-poll) or TransportHTTP
	// (the service POSTs the attempt to URL, signed with the sealed secret).
	Type         string `json:"type"`
	URL          string `json:"url,omitempty"`
	SealedSecret string `json:"sealedSecret,omitempty"`
	// AllowPrivate lets this module's URL reach private addresses (owners only).
	AllowPrivate bool `json:"allowPrivate,omitempty"`
	// Concurrency bounds the module's attempts in flight for the workspace; 0: no bound.
	Concurrency int `json:"concurrency,omitempty"`
}

// Transport types.
const (
	TransportWorker = "worker"
	TransportHTTP   = "http"
)

// Submitted records an accepted submit.
type Submitted struct {
	ExecutionID string          `json:"executionId"`
	WorkspaceID string          `json:"workspaceId"`
	APIKeyID    string          `json:"apiKeyId,omitempty"`
	Module      string          `json:"module"`
	Input       json.RawMessage `json:"input"`
	Config      json.RawMessage `json:"config"`
	Attempts    int             `json:"attempts"`
	CostMilli   int64           `json:"costMilli"`
	Callback    Callback        `json:"callback"`
	// CachedFrom is the execution whose output this one reuses for free (SPEC.md 2.1 cache
	// window); empty for a call that runs and bills normally.
	CachedFrom string `json:"cachedFrom,omitempty"`
	// RunID and StageID link a workflow run's stage to the execution that runs it.
	RunID   string `json:"runId,omitempty"`
	StageID string `json:"stageId,omitempty"`
	// Retry is a run stage's retry policy (components[].retry): its attempts are Attempts,
	// its backoff and non-retryable codes decide each failed attempt (DecideFail). Nil: the
	// executor's own pace, every failure retried while attempts remain.
	Retry *retry.Policy `json:"retry,omitempty"`
	// TimeoutMs bounds each attempt of a run stage (components[].timeoutMs) below the
	// module's own deadline; an attempt past it fails with code timeout. 0: the module's.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Transport is set when Module is a workspace module: how its attempts reach the user's
	// code. Nil: a built-in, run in-process by the executor.
	Transport *Transport `json:"transport,omitempty"`
	// Runner is the worker of the instance that accepted the submit and runs it; other
	// instances leave it alone unless it is still unclaimed after their sweep's grace. Empty:
	// any instance may claim it at once.
	Runner string    `json:"runner,omitempty"`
	At     time.Time `json:"at"`
}

// EventType names the event in the log.
func (Submitted) EventType() string { return "ExecutionSubmitted" }

// Started records that a worker claimed an attempt until LeaseUntil. Another worker may claim
// the same attempt again after the lease ends (its holder is presumed dead).
type Started struct {
	ExecutionID string `json:"executionId"`
	// RunID is set on a run stage's execution, so the scheduler need not look it up.
	RunID      string    `json:"runId,omitempty"`
	Attempt    int       `json:"attempt"`
	Worker     string    `json:"worker"`
	LeaseUntil time.Time `json:"leaseUntil"`
	At         time.Time `json:"at"`
}

// EventType names the event in the log.
func (Started) EventType() string { return "ExecutionStarted" }

// AttemptFailed records a failed attempt that will be retried at RetryAt.
type AttemptFailed struct {
	ExecutionID string          `json:"executionId"`
	Attempt     int             `json:"attempt"`
	Error       json.RawMessage `json:"error"`
	RetryAt     time.Time       `json:"retryAt"`
	At          time.Time       `json:"at"`
}

// EventType names the event in the log.
func (AttemptFailed) EventType() string { return "ExecutionAttemptFailed" }

// Completed records the output. TotalUsage is what was billed (0 for a cached repeat).
type Completed struct {
	ExecutionID string `json:"executionId"`
	// RunID is set on a run stage's execution, so the scheduler need not look it up.
	RunID      string          `json:"runId,omitempty"`
	Attempt    int             `json:"attempt"`
	Output     json.RawMessage `json:"output"`
	TotalUsage billing.Credits `json:"totalUsage"`
	// NoCallback is set when the execution owes no webhook, so a webhook dispatcher that did
	// not submit it need not read its stream to find out. Events recorded before the field
	// existed lack it and say nothing either way.
	NoCallback bool      `json:"noCallback,omitempty"`
	At         time.Time `json:"at"`
}

// EventType names the event in the log.
func (Completed) EventType() string { return "ExecutionCompleted" }

// Failed records the final failure; nothing is billed.
type Failed struct {
	ExecutionID string `json:"executionId"`
	// RunID is set on a run stage's execution, so the scheduler need not look it up.
	RunID   string          `json:"runId,omitempty"`
	Attempt int             `json:"attempt"`
	Error   json.RawMessage `json:"error"`
	// NoCallback: as Completed's.
	NoCallback bool      `json:"noCallback,omitempty"`
	At         time.Time `json:"at"`
}

// EventType names the event in the log.
func (Failed) EventType() string { return "ExecutionFailed" }

func init() {
	domain.Events.Register(Submitted{}, Started{}, AttemptFailed{}, Completed{}, Failed{})
}

// State is an execution folded from its stream.
type State struct {
	Exists      bool
	ID          string
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
	// Retry is the submit's retry policy (Submitted.Retry), never changed in place.
	Retry *retry.Policy
	// TimeoutMs bounds each attempt (Submitted.TimeoutMs); 0: the module's deadline only.
	TimeoutMs int64
	// Transport is Submitted.Transport: nil for a built-in module.
	Transport *Transport
	// Runner is the worker of the instance that accepted the submit (Submitted.Runner).
	Runner string

	Status Status
	// Attempt is the attempt running or last run (0 before the first claim).
	Attempt int
	// FailedAttempts counts attempts that ended in failure.
	FailedAttempts int
	Worker         string
	LeaseUntil     time.Time
	// RetryAt is set while waiting to retry after a failed attempt.
	RetryAt    time.Time
	Output     json.RawMessage
	Error      json.RawMessage
	TotalUsage billing.Credits
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Delivery is the terminal webhook's delivery state (delivery.go).
	Delivery Delivery
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	if next, ok := s.evolveDelivery(e); ok {
		return next
	}
	switch ev := e.(type) {
	case Submitted:
		s = State{Exists: true, ID: ev.ExecutionID, WorkspaceID: ev.WorkspaceID, APIKeyID: ev.APIKeyID,
			Module: ev.Module, Input: ev.Input, Config: ev.Config, Attempts: ev.Attempts, CostMilli: ev.CostMilli,
			Callback: ev.Callback, CachedFrom: ev.CachedFrom, RunID: ev.RunID, StageID: ev.StageID, Retry: ev.Retry, TimeoutMs: ev.TimeoutMs, Transport: ev.Transport, Runner: ev.Runner, Status: StatusCreated, CreatedAt: ev.At}
	case Started:
		s.Status, s.Attempt, s.Worker, s.LeaseUntil, s.RetryAt = StatusRunning, ev.Attempt, ev.Worker, ev.LeaseUntil, time.Time{}
	case LeaseExtended:
		s.LeaseUntil = ev.LeaseUntil
	case AttemptFailed:
		s.FailedAttempts++
		s.Error, s.RetryAt, s.Worker, s.LeaseUntil = ev.Error, ev.RetryAt, "", time.Time{}
	case Completed:
		s.Status, s.Output, s.Error, s.TotalUsage, s.Worker = StatusCompleted, ev.Output, nil, ev.TotalUsage, ""
		// A call run first completes straight from CREATED (DecideCompleteFirst); otherwise
		// this is the attempt its Started already set.
		s.Attempt = ev.Attempt
		s = s.openDelivery()
	case Failed:
		s.FailedAttempts++
		s.Status, s.Error, s.Worker = StatusFailed, ev.Error, ""
		s = s.openDelivery()
	default:
		return s
	}
	s.UpdatedAt = eventTime(e)
	return s
}

func eventTime(e domain.Event) time.Time {
	switch ev := e.(type) {
	case Submitted:
		return ev.At
	case Started:
		return ev.At
	case AttemptFailed:
		return ev.At
	case LeaseExtended:
		return ev.At
	case Completed:
		return ev.At
	case Failed:
		return ev.At
	}
	return time.Time{}
}

// Claimable reports whether a worker may claim the execution at now: never claimed, waiting
// for a retry whose time has come, or running under a lease that has run out.
func (s State) Claimable(now time.Time) bool {
	switch {
	case !s.Exists || s.Status.Terminal():
		return false
	case s.Status == StatusCreated:
		return true
	case !s.RetryAt.IsZero():
		return !now.Before(s.RetryAt)
	default:
		return !now.Before(s.LeaseUntil)
	}
}

// NextAttempt is the attempt number a claim at this state runs: the same one again when a
// lease ran out (that attempt never finished), the next after a recorded failure.
func (s State) NextAttempt() int {
	if s.Status == StatusCreated {
		return 1
	}
	if !s.RetryAt.IsZero() {
		return s.FailedAttempts + 1
	}
	return s.Attempt
}
