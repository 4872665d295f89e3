package execution

import (
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// WebhookAttempt is one callback delivery attempt as the execution's history records it.
type WebhookAttempt struct {
	Attempt    int
	StartedAt  time.Time
	EndedAt    time.Time
	StatusCode int
	Delivered  bool
	// Error is the failure of an attempt that failed; Final when no retry follows it.
	Error   json.RawMessage
	Final   bool
	RetryAt time.Time
}

// WebhookAttempts lists the delivery attempts of an execution's history, oldest first. The
// state keeps only the latest attempt; the console shows them all.
func WebhookAttempts(history []domain.Event) []WebhookAttempt {
	var out []WebhookAttempt
	at := map[int]int{} // attempt number -> index in out
	get := func(n int) *WebhookAttempt {
		i, ok := at[n]
		if !ok {
			i = len(out)
			at[n] = i
			out = append(out, WebhookAttempt{Attempt: n})
		}
		return &out[i]
	}
	for _, e := range history {
		switch ev := e.(type) {
		case WebhookAttemptStarted:
			get(ev.Attempt).StartedAt = ev.At
		case WebhookDelivered:
			a := get(ev.Attempt)
			a.EndedAt, a.StatusCode, a.Delivered = ev.At, ev.StatusCode, true
		case WebhookAttemptFailed:
			a := get(ev.Attempt)
			a.EndedAt, a.Error, a.Final, a.RetryAt = ev.At, ev.Error, ev.Final, ev.RetryAt
		}
	}
	return out
}

// Attempt is one run of an execution's module as its history records it.
type Attempt struct {
	Attempt int
	// StartedAt is when a worker claimed it; for a call run before its first claim was
	// written (DecideCompleteFirst), the submit's time.
	StartedAt time.Time
	// EndedAt is zero while it runs.
	EndedAt time.Time
	// Outcome is running, completed, failed (final) or retried (a failure followed by another
	// attempt at RetryAt); a claim whose lease ran out before any outcome shows as running
	// until the same attempt is claimed again.
	Outcome string
	Error   json.RawMessage
	RetryAt time.Time
	// Claims counts the claims of the attempt: more than one when a worker's lease ran out.
	Claims int
	// Worker is who claimed it last: an executor instance, or the worker that leased the task
	// of a workspace module (issue 28).
	Worker string
}

// The outcomes of an Attempt.
const (
	OutcomeRunning   = "running"
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeRetried   = "retried"
)

// Attempts lists the module attempts of an execution's history, oldest first.
func Attempts(history []domain.Event) []Attempt {
	var out []Attempt
	var submitted time.Time
	get := func(n int) *Attempt {
		for i := range out {
			if out[i].Attempt == n {
				return &out[i]
			}
		}
		out = append(out, Attempt{Attempt: n, Outcome: OutcomeRunning})
		return &out[len(out)-1]
	}
	for _, e := range history {
		switch ev := e.(type) {
		case Submitted:
			submitted = ev.At
		case Started:
			a := get(ev.Attempt)
			a.Claims++
			a.Worker = ev.Worker
			if a.StartedAt.IsZero() {
				a.StartedAt = ev.At
			}
		case AttemptFailed:
			a := get(ev.Attempt)
			a.EndedAt, a.Outcome, a.Error, a.RetryAt = ev.At, OutcomeRetried, ev.Error, ev.RetryAt
		case Completed:
			a := get(max(ev.Attempt, 1))
			if a.StartedAt.IsZero() {
				a.StartedAt = submitted
			}
			a.EndedAt, a.Outcome = ev.At, OutcomeCompleted
		case Failed:
			a := get(max(ev.Attempt, 1))
			if a.StartedAt.IsZero() {
				a.StartedAt = submitted
			}
			a.EndedAt, a.Outcome, a.Error = ev.At, OutcomeFailed, ev.Error
		}
	}
	return out
}
