package execution_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
)

func withCallback(attempts int) execution.Submitted {
	s := submitted(attempts)
	s.Callback = execution.Callback{URL: "https://hooks.example.com/x", SealedSecret: "sealed"}
	return s
}

func completed(at time.Time) execution.Completed {
	return execution.Completed{ExecutionID: "e1", Attempt: 1, Output: json.RawMessage(`{"ok":true}`), At: at}
}

// step decides and folds, failing the test on an error.
func step(t *testing.T, s execution.State, decide func(execution.State) ([]domain.Event, error)) execution.State {
	t.Helper()
	events, err := decide(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

func failWith(code int, retryIn time.Duration) execution.WebhookOutcome {
	return execution.WebhookOutcome{StatusCode: code, Error: json.RawMessage(`{"statusCode":500}`), RetryIn: retryIn}
}

func TestWebhookDeliveryRound(t *testing.T) {
	s := fold(withCallback(3), started(1, "x", t0), completed(t0.Add(time.Second)))
	if !s.Delivery.Pending || !s.WebhookDue(t0.Add(time.Second)) {
		t.Fatalf("a terminal execution with a callback owes a delivery: %+v", s.Delivery)
	}
	updated := s.UpdatedAt
	now := t0.Add(2 * time.Second)
	s = step(t, s, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookStart(s, "w1", time.Minute, now)
	})
	if s.Delivery.AttemptCount != 1 || s.WebhookDue(now) || !s.UpdatedAt.Equal(updated) {
		t.Fatalf("after claiming: %+v updatedAt %v", s.Delivery, s.UpdatedAt)
	}
	if _, err := execution.DecideWebhookStart(s, "w2", time.Minute, now); !errors.Is(err, execution.ErrNoDeliveryDue) {
		t.Fatalf("a second claim while the lease runs: %v", err)
	}
	s = step(t, s, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookOutcome(s, "w1", 1, failWith(500, 5*time.Second), now)
	})
	if !s.Delivery.Pending || !s.Delivery.RetryAt.Equal(now.Add(5*time.Second)) || s.WebhookDue(now) {
		t.Fatalf("after a failure: %+v", s.Delivery)
	}
	// The lease of attempt 2 runs out without an outcome: attempt 2 is claimed again.
	now = now.Add(5 * time.Second)
	s = step(t, s, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookStart(s, "w1", time.Minute, now)
	})
	now = now.Add(time.Minute)
	s = step(t, s, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookStart(s, "w2", time.Minute, now)
	})
	if s.Delivery.AttemptCount != 2 || s.Delivery.Worker != "w2" {
		t.Fatalf("a takeover keeps the attempt number: %+v", s.Delivery)
	}
	if _, err := execution.DecideWebhookOutcome(s, "w1", 2, execution.WebhookOutcome{Delivered: true}, now); !errors.Is(err, execution.ErrDeliveryLost) {
		t.Fatalf("the stale worker's outcome: %v", err)
	}
	s = step(t, s, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookOutcome(s, "w2", 2, execution.WebhookOutcome{Delivered: true, StatusCode: 204}, now)
	})
	r := s.Record()
	if s.Delivery.Pending || r.Callback.AttemptCount != 2 || r.Callback.DeliveredAt == nil || string(r.Callback.LastError) != "null" {
		t.Fatalf("after delivery: %+v", r.Callback)
	}
	// Replay: idempotent while pending, next attempt number.
	s = step(t, s, func(s execution.State) ([]domain.Event, error) { return execution.DecideReplay(s, now) })
	if ev, _ := execution.DecideReplay(s, now); len(ev) != 0 {
		t.Fatalf("a replay while one is pending queued %v", ev)
	}
	s = step(t, s, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookStart(s, "w1", time.Minute, now)
	})
	if s.Delivery.AttemptCount != 3 {
		t.Fatalf("replay attempt number %d, want 3", s.Delivery.AttemptCount)
	}
}

func TestWebhookAttemptsBoundTheRound(t *testing.T) {
	s := fold(withCallback(2), started(1, "x", t0), completed(t0))
	for attempt := 1; attempt <= 2; attempt++ {
		s = step(t, s, func(s execution.State) ([]domain.Event, error) {
			return execution.DecideWebhookStart(s, "w", time.Minute, s.Delivery.RetryAt.Add(time.Millisecond))
		})
		s = step(t, s, func(s execution.State) ([]domain.Event, error) {
			return execution.DecideWebhookOutcome(s, "w", attempt, failWith(500, time.Second), t0)
		})
	}
	if s.Delivery.Pending || s.WebhookDue(t0.Add(time.Hour)) || s.Record().Callback.LastError == nil {
		t.Fatalf("two failures of two attempts end the round with lastError: %+v", s.Delivery)
	}
	// A replay gets a fresh round of the same size.
	s = step(t, s, func(s execution.State) ([]domain.Event, error) { return execution.DecideReplay(s, t0) })
	if !s.WebhookDue(t0) || s.Delivery.RoundStart != 2 {
		t.Fatalf("replay round: %+v", s.Delivery)
	}
}

func TestWebhookGoneStops(t *testing.T) {
	s := fold(withCallback(3), started(1, "x", t0), completed(t0))
	s = step(t, s, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookStart(s, "w", time.Minute, t0)
	})
	s = step(t, s, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookOutcome(s, "w", 1, execution.WebhookOutcome{StatusCode: 410, Stop: true}, t0)
	})
	if s.Delivery.Pending {
		t.Fatal("410 must end the round")
	}
}

func TestDecideReplayConflicts(t *testing.T) {
	if _, err := execution.DecideReplay(fold(withCallback(1)), t0); !errors.Is(err, execution.ErrNotFinished) || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("unfinished: %v", err)
	}
	if _, err := execution.DecideReplay(fold(submitted(1), started(1, "x", t0), completed(t0)), t0); !errors.Is(err, execution.ErrNoCallback) {
		t.Fatalf("no callback: %v", err)
	}
	if s := fold(submitted(1), started(1, "x", t0), completed(t0)); s.Delivery.Pending || s.WebhookDue(t0) {
		t.Fatal("an execution without callback owes no delivery")
	}
	if _, err := execution.DecideReplay(execution.State{}, t0); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// TestReplayAlwaysLeadsToAnAttemptAfterIt asks for a replay at every point of a round (before
// the first claim, with an attempt in flight, waiting for a retry, after the last attempt) and,
// whatever the receiver answers afterwards, requires a delivery attempt that starts after the
// request (issue 14.5: a replay answered 200 while a round was open used to decide nothing).
func TestReplayAlwaysLeadsToAnAttemptAfterIt(t *testing.T) {
	const attempts = 2
	// The round before the replay: claim 1, fail 1, claim 2, fail 2 (final) or deliver 2.
	type action func(s execution.State, now time.Time) ([]domain.Event, error)
	claim := func(s execution.State, now time.Time) ([]domain.Event, error) {
		return execution.DecideWebhookStart(s, "w", time.Minute, now)
	}
	outcome := func(delivered bool) action {
		return func(s execution.State, now time.Time) ([]domain.Event, error) {
			o := failWith(500, time.Second)
			if delivered {
				o = execution.WebhookOutcome{Delivered: true, StatusCode: 200}
			}
			return execution.DecideWebhookOutcome(s, "w", s.Delivery.AttemptCount, o, now)
		}
	}
	for _, lastDelivered := range []bool{false, true} {
		round := []action{claim, outcome(false), claim, outcome(lastDelivered)}
		for before := 0; before <= len(round); before++ {
			for _, afterDelivers := range []bool{false, true} {
				now := t0
				s := fold(withCallback(attempts), started(1, "x", t0), completed(t0))
				for _, a := range round[:before] {
					now = now.Add(2 * time.Second)
					s = step(t, s, func(s execution.State) ([]domain.Event, error) { return a(s, now) })
				}
				now = now.Add(time.Second)
				asked := now
				s = step(t, s, func(s execution.State) ([]domain.Event, error) { return execution.DecideReplay(s, asked) })
				// Drive the round to its end; the receiver answers afterDelivers from now on.
				startedAfter := false
				for i := 0; i < 20 && (s.Delivery.Pending || s.Delivery.Worker != ""); i++ {
					now = now.Add(2 * time.Second)
					var a action = claim
					if s.Delivery.Worker != "" {
						a = outcome(afterDelivers)
					}
					events, err := a(s, now)
					if err != nil {
						t.Fatalf("lastDelivered=%v before=%d: %v", lastDelivered, before, err)
					}
					for _, e := range events {
						if st, ok := e.(execution.WebhookAttemptStarted); ok && st.At.After(asked) {
							startedAfter = true
						}
						s = s.Evolve(e)
					}
				}
				if !startedAfter {
					t.Errorf("replay asked after %d steps of a round (last delivered %v, then receiver delivers %v): no attempt started after it",
						before, lastDelivered, afterDelivers)
				}
			}
		}
	}
}
