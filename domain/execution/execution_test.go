package execution_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/retry"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func fold(events ...domain.Event) execution.State {
	var s execution.State
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

func submitted(attempts int) execution.Submitted {
	return execution.Submitted{ExecutionID: "e1", WorkspaceID: "w1", Module: "core.echo", Input: json.RawMessage(`{"a":1}`),
		Config: json.RawMessage(`{}`), Attempts: attempts, CostMilli: 1000, At: t0}
}

func started(attempt int, worker string, at time.Time) execution.Started {
	return execution.Started{ExecutionID: "e1", Attempt: attempt, Worker: worker, LeaseUntil: at.Add(time.Minute), At: at}
}

func TestDecideSubmit(t *testing.T) {
	ok := execution.Submit{ExecutionID: "e1", WorkspaceID: "w1", Module: "core.echo", Attempts: 1}
	tests := []struct {
		name  string
		given []domain.Event
		cmd   execution.Submit
		field string
		err   error
	}{
		{name: "new execution", cmd: ok},
		{name: "attempts zero", cmd: execution.Submit{ExecutionID: "e1", Module: "m", Attempts: 0}, field: "attempts"},
		{name: "attempts four", cmd: execution.Submit{ExecutionID: "e1", Module: "m", Attempts: 4}, field: "attempts"},
		{name: "no module", cmd: execution.Submit{ExecutionID: "e1", Attempts: 1}, field: "module"},
		{name: "exists", given: []domain.Event{submitted(1)}, cmd: ok, err: domain.ErrAlreadyExists},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events, err := execution.DecideSubmit(fold(tc.given...), tc.cmd, t0)
			var ve *domain.ValidationError
			switch {
			case tc.field != "":
				if !errors.As(err, &ve) || ve.Field != tc.field {
					t.Fatalf("err = %v, want a validation error on %s", err, tc.field)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
			default:
				if err != nil || len(events) != 1 {
					t.Fatalf("events %v, err %v", events, err)
				}
				if s := fold(events...); s.Status != execution.StatusCreated || s.Attempts != 1 {
					t.Fatalf("state after submit: %+v", s)
				}
			}
		})
	}
}

func TestClaimOneWinnerAndLeaseTakeover(t *testing.T) {
	s := fold(submitted(2))
	events, err := execution.DecideStart(s, "w-a", time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	s = fold(submitted(2), events[0])
	if s.Status != execution.StatusRunning || s.Attempt != 1 || s.Worker != "w-a" {
		t.Fatalf("after start: %+v", s)
	}
	if _, err := execution.DecideStart(s, "w-b", time.Minute, t0.Add(30*time.Second)); !errors.Is(err, execution.ErrNotClaimable) {
		t.Fatalf("claim under a live lease: err = %v, want ErrNotClaimable", err)
	}
	events, err = execution.DecideStart(s, "w-b", time.Minute, t0.Add(2*time.Minute))
	if err != nil {
		t.Fatalf("claim after the lease ran out: %v", err)
	}
	taken := s.Evolve(events[0])
	if taken.Attempt != 1 || taken.Worker != "w-b" {
		t.Fatalf("takeover must rerun the unfinished attempt 1 as w-b: %+v", taken)
	}
	if _, err := execution.DecideComplete(taken, "w-a", 1, json.RawMessage(`{}`), 1000, t0); !errors.Is(err, execution.ErrLeaseLost) {
		t.Fatalf("stale worker's completion: err = %v, want ErrLeaseLost", err)
	}
}

func TestRetriesThenFail(t *testing.T) {
	boom := json.RawMessage(`{"message":"boom"}`)
	s := fold(submitted(3), started(1, "w", t0))
	var history []domain.Event
	for attempt := 1; attempt <= 3; attempt++ {
		events, err := execution.DecideFail(s, "w", attempt, boom, true, time.Second, t0)
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		history = append(history, events...)
		s = s.Evolve(events[0])
		if attempt < 3 {
			if _, ok := events[0].(execution.AttemptFailed); !ok || s.Status != execution.StatusRunning {
				t.Fatalf("attempt %d: %T, status %s; want a retry while RUNNING", attempt, events[0], s.Status)
			}
			if s.Claimable(t0) || !s.Claimable(t0.Add(time.Second)) || s.NextAttempt() != attempt+1 {
				t.Fatalf("attempt %d: retry must be claimable at its time as attempt %d: %+v", attempt, attempt+1, s)
			}
			next, _ := execution.DecideStart(s, "w", time.Minute, t0.Add(time.Second))
			s = s.Evolve(next[0])
			continue
		}
		if _, ok := events[0].(execution.Failed); !ok || s.Status != execution.StatusFailed {
			t.Fatalf("last attempt: %T, status %s; want FAILED", events[0], s.Status)
		}
	}
	if s.FailedAttempts != 3 || len(history) != 3 {
		t.Fatalf("failed attempts %d, events %d; want 3 and 3", s.FailedAttempts, len(history))
	}
	rec := s.Record()
	if string(rec.Error) != string(boom) || string(rec.Output) != "null" || rec.Completed {
		t.Fatalf("record of a failed execution: %+v", rec)
	}
}

func TestRecordShapes(t *testing.T) {
	created := fold(execution.Submitted{ExecutionID: "e1", Module: "core.echo", Attempts: 1, At: t0,
		Callback: execution.Callback{URL: "https://example.com/hook", SealedSecret: "sy1.x", HeaderNames: []string{"X-A"}}})
	rec := created.Record()
	b, _ := json.Marshal(rec)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["status"] != "CREATED" || m["completed"] != false || m["output"] != nil || m["error"] != nil || m["totalUsage"] != float64(0) {
		t.Fatalf("CREATED record: %s", b)
	}
	cb := m["callback"].(map[string]any)
	if cb["url"] != "https://example.com/hook" || cb["signed"] != true || cb["signatureAlgorithm"] != "hmac-sha256-v1" ||
		cb["attemptCount"] != float64(0) || cb["lastAttemptAt"] != nil || len(cb["headerNames"].([]any)) != 1 {
		t.Fatalf("callback object: %s", b)
	}
	bare, _ := json.Marshal(fold(execution.Submitted{ExecutionID: "e2", Attempts: 1, At: t0}).Record())
	var bm map[string]map[string]any
	_ = json.Unmarshal(bare, &bm)
	if bm["callback"]["url"] != nil || bm["callback"]["signed"] != false || bm["callback"]["signatureAlgorithm"] != nil {
		t.Fatalf("callback without url: %s", bare)
	}
	done := created.Evolve(execution.Completed{ExecutionID: "e1", Attempt: 1, Output: json.RawMessage(`{"x":1}`), TotalUsage: 1500, At: t0})
	b, _ = json.Marshal(done.Record())
	_ = json.Unmarshal(b, &m)
	if m["status"] != "COMPLETED" || m["completed"] != true || m["totalUsage"] != 1.5 || m["output"].(map[string]any)["x"] != float64(1) {
		t.Fatalf("COMPLETED record: %s", b)
	}
}

func TestCacheWindow(t *testing.T) {
	var w execution.CacheWindow
	events := execution.DecideOpenWindow(w, "k", "e1", time.Minute, t0)
	if len(events) != 1 {
		t.Fatalf("first call must open the window: %v", events)
	}
	w = w.Evolve(events[0])
	if leader, ok := w.Leader(t0.Add(59 * time.Second)); !ok || leader != "e1" {
		t.Fatalf("inside the window: leader %q %v", leader, ok)
	}
	if len(execution.DecideOpenWindow(w, "k", "e2", time.Minute, t0.Add(time.Second))) != 0 {
		t.Fatal("an open window must not be reopened")
	}
	if _, ok := w.Leader(t0.Add(time.Minute)); ok {
		t.Fatal("the window must close after its length")
	}
	events = execution.DecideOpenWindow(w, "k", "e3", time.Minute, t0.Add(time.Minute))
	if len(events) != 1 || w.Evolve(events[0]).ExecutionID != "e3" {
		t.Fatalf("after the window a new first call leads: %v", events)
	}
}

func TestIdempotencyKey(t *testing.T) {
	var r execution.IdempotencyRecord
	id, events, err := execution.DecideIdempotencyKey(r, "w1", "h1", "e1", t0)
	if err != nil || id != "e1" || len(events) != 1 {
		t.Fatalf("first use: %s %v %v", id, events, err)
	}
	r = r.Evolve(events[0])
	if id, events, err = execution.DecideIdempotencyKey(r, "w1", "h1", "e2", t0.Add(time.Hour)); err != nil || id != "e1" || len(events) != 0 {
		t.Fatalf("same body again: %s %v %v", id, events, err)
	}
	if _, _, err = execution.DecideIdempotencyKey(r, "w1", "h2", "e2", t0.Add(time.Hour)); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("other body: err = %v, want ErrConflict", err)
	}
	if id, events, _ = execution.DecideIdempotencyKey(r, "w1", "h2", "e3", t0.Add(25*time.Hour)); id != "e3" || len(events) != 1 {
		t.Fatalf("after 24h the key is free: %s %v", id, events)
	}
}

// TestTerminalEventsSayWhetherAWebhookIsOwed: Completed and Failed carry NoCallback exactly
// when the execution has no callback, so other instances' dispatchers can skip it unread.
func TestTerminalEventsSayWhetherAWebhookIsOwed(t *testing.T) {
	for _, url := range []string{"", "https://example.com/hook"} {
		sub := submitted(1)
		sub.Callback.URL = url
		s := fold(sub, started(1, "w", t0))
		done, err := execution.DecideComplete(s, "w", 1, json.RawMessage(`{}`), 1000, t0)
		if err != nil {
			t.Fatal(err)
		}
		failed, err := execution.DecideFail(s, "w", 1, json.RawMessage(`{}`), true, time.Second, t0)
		if err != nil {
			t.Fatal(err)
		}
		if got := done[0].(execution.Completed).NoCallback; got != (url == "") {
			t.Errorf("callback %q: Completed.NoCallback = %v", url, got)
		}
		if got := failed[0].(execution.Failed).NoCallback; got != (url == "") {
			t.Errorf("callback %q: Failed.NoCallback = %v", url, got)
		}
	}
}

// A call run first completes straight from CREATED, as attempt 1, by the runner its submit
// names only, and never once anything else has happened to it.
func TestCompleteFirst(t *testing.T) {
	sub := submitted(2)
	sub.Runner = "w-a"
	s := fold(sub)
	events, err := execution.DecideCompleteFirst(s, "w-a", nil, 1000, t0)
	if err != nil {
		t.Fatal(err)
	}
	done := fold(sub, events[0])
	if done.Status != execution.StatusCompleted || done.Attempt != 1 || string(done.Output) != "null" || done.TotalUsage != 1000 {
		t.Fatalf("after completing first: %+v", done)
	}
	claimed := fold(sub, started(1, "w-a", t0))
	for name, c := range map[string]struct {
		s      execution.State
		worker string
	}{
		"another runner":         {s, "w-b"},
		"a submit with no owner": {fold(submitted(2)), "w-a"},
		"a claimed execution":    {claimed, "w-a"},
		"an ended execution":     {done, "w-a"},
		"no execution":           {execution.State{}, "w-a"},
	} {
		if _, err := execution.DecideCompleteFirst(c.s, c.worker, nil, 1000, t0); !errors.Is(err, execution.ErrNotClaimable) {
			t.Errorf("%s: err = %v, want ErrNotClaimable", name, err)
		}
	}
}

// A stage's retry policy decides the pace and which failures are retried.
func TestRetryPolicyDecidesEachFailedAttempt(t *testing.T) {
	policy := &retry.Policy{Attempts: 4, InitialIntervalMs: 100, BackoffCoefficient: 3, MaxIntervalMs: 500, NonRetryableErrors: []string{"bad_input"}}
	sub := submitted(4)
	sub.Retry = policy
	s := fold(sub, started(1, "w", t0))
	at := t0
	for attempt, wait := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 300 * time.Millisecond, 3: 500 * time.Millisecond} {
		st := fold(sub, started(attempt, "w", at))
		st.FailedAttempts = attempt - 1
		events, err := execution.DecideFail(st, "w", attempt, json.RawMessage(`{"code":"flaky"}`), true, time.Hour, at)
		if err != nil {
			t.Fatal(err)
		}
		af, ok := events[0].(execution.AttemptFailed)
		if !ok || af.RetryAt.Sub(at) != wait {
			t.Fatalf("attempt %d: %+v; want a retry after %v, the policy's and not the executor's hour", attempt, events[0], wait)
		}
	}
	last := fold(sub, started(4, "w", at))
	if events, _ := execution.DecideFail(last, "w", 4, json.RawMessage(`{"code":"flaky"}`), true, 0, at); !isFailed(events) {
		t.Fatalf("the policy's last attempt must fail the execution: %+v", events)
	}
	if events, _ := execution.DecideFail(s, "w", 1, json.RawMessage(`{"code":"bad_input"}`), true, 0, at); !isFailed(events) {
		t.Fatalf("a non-retryable code must fail at once: %+v", events)
	}
	if events, _ := execution.DecideFail(s, "w", 1, json.RawMessage(`{"code":"insufficient_credits"}`), false, 0, at); !isFailed(events) {
		t.Fatalf("a failure the executor will not retry stays final under a policy: %+v", events)
	}
	if s.Retry == nil || s.Retry.Attempts != 4 {
		t.Fatalf("the policy must be folded from the submit: %+v", s.Retry)
	}
}

func isFailed(events []domain.Event) bool {
	if len(events) != 1 {
		return false
	}
	_, ok := events[0].(execution.Failed)
	return ok
}

func TestSubmitWithRetryPolicyAllowsTenAttempts(t *testing.T) {
	p := retry.Policy{Attempts: 10, InitialIntervalMs: 100, BackoffCoefficient: 2}
	c := execution.Submit{ExecutionID: "e1", WorkspaceID: "w1", Module: "core.echo", Attempts: 10, Retry: &p}
	events, err := execution.DecideSubmit(execution.State{}, c, t0)
	if err != nil || events[0].(execution.Submitted).Retry.Attempts != 10 {
		t.Fatalf("a policy of 10 attempts: %v %+v", err, events)
	}
	c.Retry = nil
	if _, err := execution.DecideSubmit(execution.State{}, c, t0); err == nil {
		t.Fatal("10 attempts without a policy must be refused (SPEC.md 4.1: 1 to 3)")
	}
	c.Retry, c.TimeoutMs = &p, 50
	var tve *domain.ValidationError
	if _, err := execution.DecideSubmit(execution.State{}, c, t0); !errors.As(err, &tve) || tve.Field != "timeoutMs" {
		t.Fatalf("an attempt timeout under 100 ms: %v", err)
	}
	c.TimeoutMs = 250
	if events, err := execution.DecideSubmit(execution.State{}, c, t0); err != nil || fold(events...).TimeoutMs != 250 {
		t.Fatalf("the attempt timeout must be folded from the submit: %v", err)
	}
	c.Attempts = 3
	var ve *domain.ValidationError
	if _, err := execution.DecideSubmit(execution.State{}, c, t0); !errors.As(err, &ve) || ve.Field != "attempts" {
		t.Fatalf("attempts beside a policy must match it: %v", err)
	}
}
