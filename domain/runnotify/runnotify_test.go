package runnotify_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/runnotify"
)

var t0 = time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)

func fold(s runnotify.State, events []domain.Event) runnotify.State {
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

// start claims the next attempt at now and fails the test if none is due.
func start(t *testing.T, s runnotify.State, worker string, now time.Time) runnotify.State {
	t.Helper()
	events, err := runnotify.DecideStart(s, "r", true, worker, time.Minute, now)
	if err != nil {
		t.Fatalf("start at %s: %v", now, err)
	}
	return fold(s, events)
}

func record(t *testing.T, s runnotify.State, worker string, o execution.WebhookOutcome, now time.Time) runnotify.State {
	t.Helper()
	events, err := runnotify.DecideOutcome(s, worker, s.AttemptCount, o, now)
	if err != nil {
		t.Fatal(err)
	}
	return fold(s, events)
}

var failed = execution.WebhookOutcome{StatusCode: 500, RetryIn: 5 * time.Second}

func TestNothingIsOwedBeforeTheRunEndsWithANotify(t *testing.T) {
	if _, err := runnotify.DecideStart(runnotify.State{}, "r", false, "w", time.Minute, t0); !errors.Is(err, execution.ErrNoDeliveryDue) {
		t.Fatalf("claim for a run that owes nothing: %v", err)
	}
	for _, tc := range []struct {
		finished, notify bool
		want             error
	}{{false, true, runnotify.ErrNotFinished}, {true, false, runnotify.ErrNoNotify}} {
		if _, err := runnotify.DecideReplay(runnotify.State{}, "r", tc.finished, tc.notify, t0); !errors.Is(err, tc.want) || !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("replay finished=%v notify=%v: %v", tc.finished, tc.notify, err)
		}
	}
}

// A round has three attempts at the dispatcher's pace; the last failure closes it, and a
// replay opens another whose attempt numbers continue.
func TestARoundRetriesThenAReplayOpensAnother(t *testing.T) {
	s := start(t, runnotify.State{}, "w", t0)
	if s.AttemptCount != 1 || s.RunID != "r" {
		t.Fatalf("first claim: %+v", s)
	}
	s = record(t, s, "w", failed, t0)
	if s.Due(true, t0.Add(4*time.Second)) || !s.Due(true, t0.Add(5*time.Second)) || s.RoundAttempt(2) != 2 {
		t.Fatalf("after a failure: %+v", s)
	}
	s = record(t, start(t, s, "w", t0.Add(5*time.Second)), "w", failed, t0.Add(5*time.Second))
	s = record(t, start(t, s, "w", t0.Add(time.Minute)), "w", failed, t0.Add(time.Minute))
	if !s.Closed || s.Due(true, t0.Add(time.Hour)) || s.AttemptCount != 3 {
		t.Fatalf("after the round's third failure: %+v", s)
	}
	events, err := runnotify.DecideReplay(s, "r", true, true, t0.Add(time.Hour))
	if err != nil || len(events) != 1 {
		t.Fatalf("replay: %v %v", events, err)
	}
	s = fold(s, events)
	if again, _ := runnotify.DecideReplay(s, "r", true, true, t0.Add(time.Hour)); len(again) != 0 {
		t.Fatalf("a second replay of a fresh round recorded %v", again)
	}
	s = start(t, s, "w", t0.Add(time.Hour))
	if s.AttemptCount != 4 || s.RoundAttempt(4) != 1 {
		t.Fatalf("the replay's attempt: %+v", s)
	}
	s = record(t, s, "w", execution.WebhookOutcome{Delivered: true, StatusCode: 204}, t0.Add(time.Hour))
	if !s.Closed || s.DeliveredAt.IsZero() || s.LastError != nil {
		t.Fatalf("after a delivery: %+v", s)
	}
}

// A claim whose lease ran out is taken over with the same attempt number (same delivery id);
// the first worker's late outcome is refused. A replay during an attempt opens a round when
// its outcome is recorded.
func TestLeasesAndQueuedReplays(t *testing.T) {
	s := start(t, runnotify.State{}, "a", t0)
	if _, err := runnotify.DecideStart(s, "r", true, "b", time.Minute, t0.Add(30*time.Second)); !errors.Is(err, execution.ErrNoDeliveryDue) {
		t.Fatalf("claim under a live lease: %v", err)
	}
	s = start(t, s, "b", t0.Add(time.Minute))
	if s.AttemptCount != 1 || s.Worker != "b" {
		t.Fatalf("takeover: %+v", s)
	}
	if _, err := runnotify.DecideOutcome(s, "a", 1, failed, t0.Add(time.Minute)); !errors.Is(err, execution.ErrDeliveryLost) {
		t.Fatalf("the lost worker's outcome: %v", err)
	}
	events, err := runnotify.DecideReplay(s, "r", true, true, t0.Add(time.Minute))
	if err != nil || len(events) != 1 || events[0].EventType() != "RunNotifyReplayQueued" {
		t.Fatalf("replay in flight: %v %v", events, err)
	}
	s = fold(s, events)
	s = record(t, s, "b", execution.WebhookOutcome{Delivered: true, StatusCode: 200}, t0.Add(time.Minute))
	if s.Closed || !s.Due(true, t0.Add(time.Minute)) || s.RoundStart != 1 {
		t.Fatalf("after the queued replay's outcome: %+v", s)
	}
}
