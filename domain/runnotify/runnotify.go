// Package runnotify is the delivery of a run's workflow.run.terminal webhook to its
// definition's notify URL (docs/webhooks.md). It follows execution delivery
// (domain/execution/delivery.go) on a stream of its own, runnotify-<runId>: each attempt is
// claimed by RunNotifyAttemptStarted at the exact revision read (one instance wins), under a
// lease, then answered by RunNotifyDelivered or RunNotifyAttemptFailed. A run's own stream is
// the scheduler's, which folds every event of it; delivery attempts there would wake it for
// nothing and race its appends.
//
// The first round is owed once the run has finished and its definition has a notify; the
// stream is empty until then. Each replay opens another round; a round has up to Attempts
// attempts, and attempt numbers continue across rounds.
package runnotify

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
)

// Category is the stream category: runnotify-<runId>.
const Category = "runnotify"

// Attempts is how many attempts a round has.
const Attempts = 3

// Errors of replay-callback; both are conflicts (409).
var (
	ErrNotFinished = fmt.Errorf("%w: the run has not finished", domain.ErrConflict)
	ErrNoNotify    = fmt.Errorf("%w: the run's definition has no notify", domain.ErrConflict)
)

// AttemptStarted claims attempt Attempt for Worker until LeaseUntil.
type AttemptStarted struct {
	RunID      string    `json:"runId"`
	Attempt    int       `json:"attempt"`
	Worker     string    `json:"worker"`
	LeaseUntil time.Time `json:"leaseUntil"`
	At         time.Time `json:"at"`
}

// Delivered records a 2xx answer to attempt Attempt.
type Delivered struct {
	RunID      string    `json:"runId"`
	Attempt    int       `json:"attempt"`
	Worker     string    `json:"worker"`
	StatusCode int       `json:"statusCode"`
	At         time.Time `json:"at"`
}

// AttemptFailed records a failed attempt; RetryAt is when the round's next one is due, zero
// when the round is over (Final).
type AttemptFailed struct {
	RunID   string          `json:"runId"`
	Attempt int             `json:"attempt"`
	Worker  string          `json:"worker"`
	Error   json.RawMessage `json:"error"`
	Final   bool            `json:"final"`
	RetryAt time.Time       `json:"retryAt,omitzero"`
	At      time.Time       `json:"at"`
}

// ReplayRequested opens a new round (replay-callback).
type ReplayRequested struct {
	RunID string    `json:"runId"`
	At    time.Time `json:"at"`
}

// ReplayQueued records a replay asked for while attempt Attempt was in flight: a new round
// opens with its outcome.
type ReplayQueued struct {
	RunID   string    `json:"runId"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
}

// EventType names the event in the log.
func (AttemptStarted) EventType() string { return "RunNotifyAttemptStarted" }

// EventType names the event in the log.
func (Delivered) EventType() string { return "RunNotifyDelivered" }

// EventType names the event in the log.
func (AttemptFailed) EventType() string { return "RunNotifyAttemptFailed" }

// EventType names the event in the log.
func (ReplayRequested) EventType() string { return "RunNotifyReplayRequested" }

// EventType names the event in the log.
func (ReplayQueued) EventType() string { return "RunNotifyReplayQueued" }

// IdempotencyKey makes a retried append of the same outcome a no-op.
func (e Delivered) IdempotencyKey() string { return outcomeKey(e.RunID, e.Attempt, e.Worker) }

// IdempotencyKey makes a retried append of the same outcome a no-op.
func (e AttemptFailed) IdempotencyKey() string { return outcomeKey(e.RunID, e.Attempt, e.Worker) }

func outcomeKey(run string, attempt int, worker string) string {
	return "runnotify-outcome:" + run + ":" + strconv.Itoa(attempt) + ":" + worker
}

func init() {
	domain.Events.Register(AttemptStarted{}, Delivered{}, AttemptFailed{}, ReplayRequested{}, ReplayQueued{})
}

// EventTypes are the stream's event types, for subscription filters.
func EventTypes() []string {
	return []string{AttemptStarted{}.EventType(), Delivered{}.EventType(), AttemptFailed{}.EventType(),
		ReplayRequested{}.EventType(), ReplayQueued{}.EventType()}
}

// State is a run's notification stream folded. It says nothing of the run itself: Open tells
// whether a delivery is owed at all.
type State struct {
	RunID string
	// AttemptCount is the number of the latest attempt claimed (0 before any).
	AttemptCount int
	// Closed is true when the latest round has ended (delivered, or out of attempts).
	Closed bool
	// RoundStart is AttemptCount when the open round began.
	RoundStart    int
	LastAttemptAt time.Time
	DeliveredAt   time.Time
	LastError     json.RawMessage
	// Worker and LeaseUntil describe the claim of attempt AttemptCount while it has no outcome.
	Worker       string
	LeaseUntil   time.Time
	RetryAt      time.Time
	ReplayQueued bool
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case AttemptStarted:
		s.RunID, s.AttemptCount, s.LastAttemptAt, s.Worker, s.LeaseUntil = ev.RunID, ev.Attempt, ev.At, ev.Worker, ev.LeaseUntil
		s.RetryAt, s.ReplayQueued = time.Time{}, false
	case Delivered:
		s.DeliveredAt, s.LastError, s.Closed, s.Worker, s.LeaseUntil = ev.At, nil, true, "", time.Time{}
	case AttemptFailed:
		s.LastError, s.Worker, s.LeaseUntil, s.Closed, s.RetryAt = ev.Error, "", time.Time{}, ev.Final, ev.RetryAt
	case ReplayRequested:
		s.RunID, s.Closed, s.RoundStart, s.RetryAt, s.ReplayQueued = ev.RunID, false, s.AttemptCount, time.Time{}, false
	case ReplayQueued:
		s.ReplayQueued = true
	}
	return s
}

// Due reports whether an attempt may be claimed at now, for a run that owes one (open: it
// has finished and has a notify).
func (s State) Due(open bool, now time.Time) bool {
	switch {
	case !open || s.Closed:
		return false
	case s.Worker != "":
		return !now.Before(s.LeaseUntil)
	default:
		return !now.Before(s.RetryAt)
	}
}

// NextAt is when the open round's next attempt may be claimed (zero when none is owed).
func (s State) NextAt(open bool) time.Time {
	switch {
	case !open || s.Closed:
		return time.Time{}
	case s.Worker != "":
		return s.LeaseUntil
	default:
		return s.RetryAt
	}
}

// RoundAttempt is attempt's place in its round, from 1 (the backoff's exponent).
func (s State) RoundAttempt(attempt int) int { return max(attempt-s.RoundStart, 1) }

// DecideStart claims the next attempt for worker until now+lease: the same number again when a
// claim's lease ran out without an outcome (the receiver may have seen it: same delivery id).
func DecideStart(s State, runID string, open bool, worker string, lease time.Duration, now time.Time) ([]domain.Event, error) {
	if !s.Due(open, now) {
		return nil, execution.ErrNoDeliveryDue
	}
	attempt := s.AttemptCount + 1
	if s.Worker != "" {
		attempt = s.AttemptCount
	}
	return []domain.Event{AttemptStarted{RunID: runID, Attempt: attempt, Worker: worker, LeaseUntil: now.Add(lease).UTC(), At: now.UTC()}}, nil
}

// DecideOutcome records what worker's attempt came to; a replay queued meanwhile opens a new
// round right after it.
func DecideOutcome(s State, worker string, attempt int, o execution.WebhookOutcome, now time.Time) ([]domain.Event, error) {
	if s.Closed || s.Worker != worker || s.AttemptCount != attempt {
		return nil, execution.ErrDeliveryLost
	}
	var ev domain.Event
	if o.Delivered {
		ev = Delivered{RunID: s.RunID, Attempt: attempt, Worker: worker, StatusCode: o.StatusCode, At: now.UTC()}
	} else {
		failure := o.Error
		if len(failure) == 0 {
			failure = json.RawMessage(`{"message":"delivery failed"}`)
		}
		f := AttemptFailed{RunID: s.RunID, Attempt: attempt, Worker: worker, Error: failure, At: now.UTC()}
		if o.Stop || attempt-s.RoundStart >= Attempts {
			f.Final = true
		} else {
			f.RetryAt = now.Add(max(o.RetryIn, 0)).UTC()
		}
		ev = f
	}
	if s.ReplayQueued {
		return []domain.Event{ev, ReplayRequested{RunID: s.RunID, At: now.UTC()}}, nil
	}
	return []domain.Event{ev}, nil
}

// DecideReplay makes sure an attempt starts after now (replay-callback): a new round, due at
// once, or, with an attempt in flight, a replay queued behind it. It decides nothing while a
// fresh round has had no attempt claimed yet, or a replay is queued already.
func DecideReplay(s State, runID string, finished, hasNotify bool, now time.Time) ([]domain.Event, error) {
	switch {
	case !finished:
		return nil, ErrNotFinished
	case !hasNotify:
		return nil, ErrNoNotify
	case s.ReplayQueued:
		return nil, nil
	case s.Worker != "":
		return []domain.Event{ReplayQueued{RunID: runID, Attempt: s.AttemptCount, At: now.UTC()}}, nil
	case !s.Closed && s.RoundStart == s.AttemptCount && s.RetryAt.IsZero():
		return nil, nil
	}
	return []domain.Event{ReplayRequested{RunID: runID, At: now.UTC()}}, nil
}
