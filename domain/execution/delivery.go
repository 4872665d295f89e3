package execution

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Webhook delivery (SPEC.md 6.1, DESIGN.md section 5). Every attempt is a pair of events on the
// execution stream: WebhookAttemptStarted claims attempt n for a worker under a lease (appended
// at the exact revision read, so one instance wins), then WebhookDelivered or
// WebhookAttemptFailed records its outcome. A worker that dies between sending and recording
// leaves a claim whose lease runs out; the attempt is then claimed again with the same number,
// so the receiver sees the same x-delivery-id and can de-duplicate.
//
// Deliveries happen in rounds: the first round opens when the execution ends with a callback
// URL, and each replay-callback opens another. A round may use the execution's attempts (1 to 3,
// SPEC.md 8); attempt numbers continue across rounds.

// Errors of replay-callback; both are conflicts (409).
var (
	ErrNotFinished = fmt.Errorf("%w: the execution has not finished", domain.ErrConflict)
	ErrNoCallback  = fmt.Errorf("%w: the execution has no callbackUrl", domain.ErrConflict)
)

// ErrNoDeliveryDue means no webhook attempt may be claimed now: none is pending, another
// worker holds one, or a retry is not due yet. The caller moves on.
var ErrNoDeliveryDue = errors.New("no webhook delivery due")

// ErrDeliveryLost means the worker's claim of an attempt is no longer current: its outcome
// must not be recorded.
var ErrDeliveryLost = errors.New("webhook attempt claim lost")

// WebhookAttemptStarted claims delivery attempt Attempt for Worker until LeaseUntil.
type WebhookAttemptStarted struct {
	ExecutionID string    `json:"executionId"`
	Attempt     int       `json:"attempt"`
	Worker      string    `json:"worker"`
	LeaseUntil  time.Time `json:"leaseUntil"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (WebhookAttemptStarted) EventType() string { return "WebhookAttemptStarted" }

// WebhookDelivered records a 2xx answer to attempt Attempt.
type WebhookDelivered struct {
	ExecutionID string    `json:"executionId"`
	Attempt     int       `json:"attempt"`
	Worker      string    `json:"worker"`
	StatusCode  int       `json:"statusCode"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (WebhookDelivered) EventType() string { return "WebhookDelivered" }

// IdempotencyKey makes a retried append of the same outcome a no-op.
func (e WebhookDelivered) IdempotencyKey() string {
	return "webhook-outcome:" + e.ExecutionID + ":" + strconv.Itoa(e.Attempt) + ":" + e.Worker
}

// WebhookAttemptFailed records a failed attempt: a non-2xx answer, a timeout or a network error
// (Error says which). RetryAt is when the next attempt of the round is due; it is zero when the
// round is over (Final: attempts used up, or the receiver answered 410 Gone).
type WebhookAttemptFailed struct {
	ExecutionID string          `json:"executionId"`
	Attempt     int             `json:"attempt"`
	Worker      string          `json:"worker"`
	Error       json.RawMessage `json:"error"`
	Final       bool            `json:"final"`
	RetryAt     time.Time       `json:"retryAt,omitzero"`
	At          time.Time       `json:"at"`
}

// EventType names the event in the log.
func (WebhookAttemptFailed) EventType() string { return "WebhookAttemptFailed" }

// IdempotencyKey makes a retried append of the same outcome a no-op.
func (e WebhookAttemptFailed) IdempotencyKey() string {
	return "webhook-outcome:" + e.ExecutionID + ":" + strconv.Itoa(e.Attempt) + ":" + e.Worker
}

// WebhookReplayRequested opens a new delivery round (replay-callback, SPEC.md 4.4).
type WebhookReplayRequested struct {
	ExecutionID string    `json:"executionId"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (WebhookReplayRequested) EventType() string { return "WebhookReplayRequested" }

// WebhookReplayQueued records a replay-callback asked for while attempt Attempt was in flight:
// that attempt started before the request, so whatever it comes to, a new round opens when its
// outcome is recorded (unless another attempt is claimed first, e.g. after its lease ran out).
type WebhookReplayQueued struct {
	ExecutionID string    `json:"executionId"`
	Attempt     int       `json:"attempt"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (WebhookReplayQueued) EventType() string { return "WebhookReplayQueued" }

func init() {
	domain.Events.Register(WebhookAttemptStarted{}, WebhookDelivered{}, WebhookAttemptFailed{}, WebhookReplayRequested{},
		WebhookReplayQueued{})
}

// DeliveryEventTypes are the event types of webhook delivery, for subscription filters.
func DeliveryEventTypes() []string {
	return []string{WebhookAttemptStarted{}.EventType(), WebhookDelivered{}.EventType(),
		WebhookAttemptFailed{}.EventType(), WebhookReplayRequested{}.EventType(), WebhookReplayQueued{}.EventType()}
}

// Delivery is the webhook delivery state of an execution.
type Delivery struct {
	// AttemptCount is the number of the latest attempt claimed (0 before any).
	AttemptCount  int
	LastAttemptAt time.Time
	// DeliveredAt is when the latest successful attempt was answered.
	DeliveredAt time.Time
	// LastError is the failure of the latest attempt with an outcome; nil after a success.
	LastError json.RawMessage
	// Pending is true while a round is open (a delivery is owed).
	Pending bool
	// RoundStart is AttemptCount when the open round began.
	RoundStart int
	// Worker and LeaseUntil describe the claim of attempt AttemptCount while it has no outcome.
	Worker     string
	LeaseUntil time.Time
	// RetryAt is when the next attempt of the open round is due (zero: at once).
	RetryAt time.Time
	// ReplayQueued is true when a replay was asked for while the attempt in flight had started:
	// a new round opens with that attempt's outcome.
	ReplayQueued bool
}

// evolveDelivery applies a delivery event. It leaves UpdatedAt alone: that is the time of the
// execution's own last change, and the callback object carries the delivery's times.
func (s State) evolveDelivery(e domain.Event) (State, bool) {
	d := &s.Delivery
	switch ev := e.(type) {
	case WebhookAttemptStarted:
		d.AttemptCount, d.LastAttemptAt, d.Worker, d.LeaseUntil, d.RetryAt = ev.Attempt, ev.At, ev.Worker, ev.LeaseUntil, time.Time{}
		d.ReplayQueued = false // this attempt starts after any replay request before it
	case WebhookReplayQueued:
		d.ReplayQueued = true
	case WebhookDelivered:
		d.DeliveredAt, d.LastError, d.Pending, d.Worker, d.LeaseUntil = ev.At, nil, false, "", time.Time{}
	case WebhookAttemptFailed:
		d.LastError, d.Worker, d.LeaseUntil = ev.Error, "", time.Time{}
		d.Pending, d.RetryAt = !ev.Final, ev.RetryAt
	case WebhookReplayRequested:
		d.Pending, d.RoundStart, d.RetryAt, d.ReplayQueued = true, d.AttemptCount, time.Time{}, false
	default:
		return s, false
	}
	return s, true
}

// openDelivery opens the first round when the execution ends with a callback URL.
func (s State) openDelivery() State {
	if s.Callback.URL != "" {
		s.Delivery.Pending, s.Delivery.RoundStart = true, s.Delivery.AttemptCount
	}
	return s
}

// WebhookDue reports whether a worker may claim a delivery attempt at now: a round is open and
// no attempt is in flight (or its lease has run out), and any retry wait is over.
func (s State) WebhookDue(now time.Time) bool {
	d := s.Delivery
	switch {
	case !s.Exists || !s.Status.Terminal() || !d.Pending:
		return false
	case d.Worker != "":
		return !now.Before(d.LeaseUntil)
	default:
		return !now.Before(d.RetryAt)
	}
}

// WebhookRetryAt is when the open round's next attempt may be claimed (zero when none is owed).
func (s State) WebhookRetryAt() time.Time {
	d := s.Delivery
	switch {
	case !d.Pending:
		return time.Time{}
	case d.Worker != "":
		return d.LeaseUntil
	default:
		return d.RetryAt
	}
}

// nextWebhookAttempt is the attempt a claim runs: the same number again when a claim's lease ran
// out without an outcome (the receiver may have seen it: same delivery id), else the next.
func (s State) nextWebhookAttempt() int {
	if s.Delivery.Worker != "" {
		return s.Delivery.AttemptCount
	}
	return s.Delivery.AttemptCount + 1
}

// DecideWebhookStart claims the next delivery attempt for worker until now+lease.
func DecideWebhookStart(s State, worker string, lease time.Duration, now time.Time) ([]domain.Event, error) {
	if !s.WebhookDue(now) {
		return nil, ErrNoDeliveryDue
	}
	return []domain.Event{WebhookAttemptStarted{ExecutionID: s.ID, Attempt: s.nextWebhookAttempt(), Worker: worker,
		LeaseUntil: now.Add(lease).UTC(), At: now.UTC()}}, nil
}

// WebhookOutcome is what one attempt's request came to.
type WebhookOutcome struct {
	// Delivered is true for a 2xx answer; StatusCode is the answer's status (0: none).
	Delivered  bool
	StatusCode int
	// Error describes a failure (SPEC.md 2.2 lastError).
	Error json.RawMessage
	// Stop ends the round after this failure (410 Gone).
	Stop bool
	// RetryIn is the wait before the next attempt, when the round has one left.
	RetryIn time.Duration
}

// DecideWebhookOutcome records the outcome of worker's attempt. When a replay was queued while
// it was in flight, a new round opens right after it.
func DecideWebhookOutcome(s State, worker string, attempt int, o WebhookOutcome, now time.Time) ([]domain.Event, error) {
	d := s.Delivery
	if !d.Pending || d.Worker != worker || d.AttemptCount != attempt {
		return nil, ErrDeliveryLost
	}
	ev := webhookOutcomeEvent(s, worker, attempt, o, now)
	if d.ReplayQueued {
		return []domain.Event{ev, WebhookReplayRequested{ExecutionID: s.ID, At: now.UTC()}}, nil
	}
	return []domain.Event{ev}, nil
}

func webhookOutcomeEvent(s State, worker string, attempt int, o WebhookOutcome, now time.Time) domain.Event {
	if o.Delivered {
		return WebhookDelivered{ExecutionID: s.ID, Attempt: attempt, Worker: worker, StatusCode: o.StatusCode, At: now.UTC()}
	}
	failure := o.Error
	if len(failure) == 0 {
		failure = json.RawMessage(`{"message":"delivery failed"}`)
	}
	ev := WebhookAttemptFailed{ExecutionID: s.ID, Attempt: attempt, Worker: worker, Error: failure, At: now.UTC()}
	if o.Stop || attempt-s.Delivery.RoundStart >= s.Attempts {
		ev.Final = true
	} else {
		ev.RetryAt = now.Add(max(o.RetryIn, 0)).UTC()
	}
	return ev
}

// DecideReplay makes sure a delivery attempt starts after now (replay-callback, SPEC.md 4.4).
// With no attempt in flight it opens a new round, due at once, with a fresh count of attempts;
// with one in flight, which started before the request, it queues the replay: the new round
// opens with that attempt's outcome. It decides nothing when that is already so: a fresh round
// that no attempt has been claimed in, or a replay already queued.
func DecideReplay(s State, now time.Time) ([]domain.Event, error) {
	d := s.Delivery
	switch {
	case !s.Exists:
		return nil, fmt.Errorf("execution: %w", domain.ErrNotFound)
	case !s.Status.Terminal():
		return nil, ErrNotFinished
	case s.Callback.URL == "":
		return nil, ErrNoCallback
	case d.ReplayQueued:
		return nil, nil
	case d.Worker != "":
		return []domain.Event{WebhookReplayQueued{ExecutionID: s.ID, Attempt: d.AttemptCount, At: now.UTC()}}, nil
	case d.Pending && d.RoundStart == d.AttemptCount && d.RetryAt.IsZero():
		return nil, nil
	}
	return []domain.Event{WebhookReplayRequested{ExecutionID: s.ID, At: now.UTC()}}, nil
}
