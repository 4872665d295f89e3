package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/testenv"
)

// eventCount is the number of events in env's log, read straight from the table: a refused
// submit must leave it unchanged.
func eventCount(t *testing.T, env *testenv.Env) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func newSubmitHandler(t *testing.T, env *testenv.Env) *commands.Commands {
	t.Helper()
	key, _ := seal.GenerateKey()
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return commands.New(env.Store, commands.WithSealer(sealer))
}

// A refused submit appends nothing: no cache window, no idempotency binding, no execution,
// whichever check refuses it.
func TestRefusedSubmitAppendsNothing(t *testing.T) {
	env := testenv.New(t)
	h := newSubmitHandler(t, env)
	ws := env.Workspace(t, 10)
	poor := env.Workspace(t, 0)
	valid := func() commands.SubmitExecution {
		return commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo", Input: json.RawMessage(`{"a":1}`),
			Config: json.RawMessage(`{}`), Attempts: 1, IdempotencyKey: "k1", BodyHash: "h1", CacheWindow: time.Minute}
	}
	cases := []struct {
		name   string
		change func(*commands.SubmitExecution)
		field  string // the field the 400 names; "" for insufficient credits
	}{
		{"NUL in input", func(c *commands.SubmitExecution) { c.Input = json.RawMessage(`{"a":"x\u0000y"}`) }, "input"},
		{"lone surrogate in input", func(c *commands.SubmitExecution) { c.Input = json.RawMessage(`{"a":"\ud800"}`) }, "input"},
		{"invalid UTF-8 in config", func(c *commands.SubmitExecution) { c.Config = json.RawMessage("{\"a\":\"\xff\"}") }, "config"},
		{"NUL in config", func(c *commands.SubmitExecution) { c.Config = json.RawMessage(`{"\u0000":1}`) }, "config"},
		{"NUL in callback URL", func(c *commands.SubmitExecution) { c.Callback.URL = "https://example.com/\x00" }, "callbackUrl"},
		{"invalid UTF-8 in callback secret", func(c *commands.SubmitExecution) {
			c.Callback = commands.CallbackRequest{URL: "https://example.com/", Secret: "s\xff"}
		}, "callbackSecret"},
		{"lone surrogate in a callback header", func(c *commands.SubmitExecution) {
			c.Callback = commands.CallbackRequest{URL: "https://example.com/", Headers: map[string]string{"X-A": "\xed\xa0\x80"}}
		}, "callbackHeaders.X-A"},
		{"callback over http", func(c *commands.SubmitExecution) { c.Callback.URL = "http://example.com/" }, "callbackUrl"},
		{"config the module refuses", func(c *commands.SubmitExecution) { c.Module, c.Input = "core.delay", json.RawMessage(`{}`) }, ""},
		{"unknown module", func(c *commands.SubmitExecution) { c.Module = "no.such" }, "module"},
		// The attempts range is the command's to check (the API parses the type only), before
		// the idempotency key is bound.
		{"no attempts", func(c *commands.SubmitExecution) { c.Attempts = 0 }, "attempts"},
		{"too many attempts", func(c *commands.SubmitExecution) { c.Attempts = execution.MaxAttempts + 1 }, "attempts"},
		{"balance too low", func(c *commands.SubmitExecution) { c.WorkspaceID = poor }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := eventCount(t, env)
			c := valid()
			tc.change(&c)
			_, err := h.Executions.SubmitExecution(context.Background(), c)
			var ve *domain.ValidationError
			switch {
			case err == nil:
				t.Fatal("the submit was accepted")
			case tc.name == "balance too low":
				if !errors.Is(err, domain.ErrInsufficientCredits) {
					t.Fatalf("err = %v, want insufficient credits", err)
				}
			case !errors.As(err, &ve):
				t.Fatalf("err = %v, want a validation error", err)
			case tc.field != "" && !strings.HasPrefix(ve.Error(), tc.field+":"):
				t.Fatalf("err = %q, want one naming %s", ve.Error(), tc.field)
			}
			if after := eventCount(t, env); after != before {
				t.Fatalf("a refused submit appended %d events", after-before)
			}
		})
	}
	// The same key then binds normally: nothing of the refused submits held it.
	st, err := h.Executions.SubmitExecution(context.Background(), valid())
	if err != nil || st.Module != "core.echo" || st.CostMilli != 1000 {
		t.Fatalf("valid submit: %+v, %v", st, err)
	}
	again, err := h.Executions.SubmitExecution(context.Background(), valid())
	if err != nil || again.ID != st.ID {
		t.Fatalf("repeat with the idempotency key: %s, %v; want %s", again.ID, err, st.ID)
	}
}

// The command seals the callback's secret and header values and prices the call itself.
func TestSubmitSealsCallbackAndPrices(t *testing.T) {
	env := testenv.New(t)
	h := newSubmitHandler(t, env)
	ws := env.Workspace(t, 10)
	st, err := h.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
		Input: json.RawMessage(`{}`), Config: json.RawMessage(`{}`), Attempts: 1,
		Callback: commands.CallbackRequest{URL: "https://example.com/hook", Secret: "whsec", Headers: map[string]string{"X-B": "v", "X-A": "w"}}})
	if err != nil {
		t.Fatal(err)
	}
	cb := st.Callback
	if cb.SealedSecret == "" || strings.Contains(cb.SealedSecret, "whsec") || cb.SealedHeaders == "" ||
		strings.Join(cb.HeaderNames, ",") != "X-A,X-B" || st.CostMilli != 1000 {
		t.Fatalf("callback %+v cost %d", cb, st.CostMilli)
	}
	unsealed := commands.New(env.Store)
	_, err = unsealed.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
		Input: json.RawMessage(`{}`), Config: json.RawMessage(`{}`), Attempts: 1,
		Callback: commands.CallbackRequest{URL: "https://example.com/hook", Secret: "whsec"}})
	if err == nil {
		t.Fatal("a handler without a sealer stored a callback secret")
	}
}

// Identical calls racing in two processes open one cache window: one call leads it, every
// other reuses the leader's output. Each process decides on the window it has just read, so
// the race is lost on the append's expected revision and decided again.
func TestConcurrentCallsOpenOneCacheWindow(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	handlers := []*commands.Commands{newSubmitHandler(t, env), newSubmitHandler(t, env)}
	const n = 16
	states := make([]execution.State, n)
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			st, err := handlers[i%2].Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
				Input: json.RawMessage(`{"same":true}`), Config: json.RawMessage(`{}`), Attempts: 1, CacheWindow: time.Minute})
			states[i] = st
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	leaders := map[string]bool{}
	for _, st := range states {
		if st.CachedFrom == "" {
			leaders[st.ID] = true
		}
	}
	if len(leaders) != 1 {
		t.Fatalf("%d calls lead a window, want 1", len(leaders))
	}
	for _, st := range states {
		if st.CachedFrom != "" && !leaders[st.CachedFrom] {
			t.Fatalf("execution %s reuses %s, which leads no window", st.ID, st.CachedFrom)
		}
	}
}

// recordingRunner is a Runner that records a call run first as the executor does, in a charge
// batch of its own (ChargeAndFinish), with the window the call opens and the run step it
// carries; it keeps the result. before, when set, runs just before the batch.
type recordingRunner struct {
	cmds   *commands.Commands
	last   commands.FinishResult
	before func(commands.FirstRun)
}

func (r *recordingRunner) Running() bool  { return true }
func (r *recordingRunner) Worker() string { return "recording" }
func (r *recordingRunner) Take(st execution.State) <-chan execution.State {
	done := make(chan execution.State, 1)
	done <- st
	return done
}
func (r *recordingRunner) TryRunFirst(ctx context.Context, run commands.FirstRun) (execution.State, bool) {
	return r.RunFirst(ctx, run, time.Second)
}
func (r *recordingRunner) RunFirst(ctx context.Context, run commands.FirstRun, _ time.Duration) (execution.State, bool) {
	st := run.State
	usage := billing.Credits(st.CostMilli)
	if r.before != nil {
		r.before(run)
	}
	res, err := r.cmds.Charges.ChargeAndFinish(ctx, st.WorkspaceID, []commands.ChargedFinish{{ExecutionID: st.ID,
		Charge:  commands.ChargeRequest{Cause: "execution-" + st.ID, Amount: usage},
		Outcome: commands.Outcome{Worker: r.Worker(), Output: st.Input, Usage: usage},
		Create:  run.Create, Claim: run.Claim, Window: run.Window, Step: run.Step}})
	if err != nil {
		return st, false
	}
	r.last = res[0]
	return res[0].State, res[0].Recorded
}

// A call run first opens its cache window in the commit that records it, expecting the window
// where its process last knew it. When another process opened the window meanwhile, that
// expectation fails: the call alone is left out of the commit, uncharged, and its submit
// finds the window and becomes the leader's free repeat.
func TestARunFirstCallThatLosesItsWindowIsTheLeadersRepeat(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	call := commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo", Input: json.RawMessage(`{"same":1}`),
		Config: json.RawMessage(`{}`), Attempts: 1, CacheWindow: time.Minute, WaitFor: 5 * time.Second}
	runner := &recordingRunner{cmds: newSubmitHandler(t, env)}
	here := commands.WithRunner(runner.cmds, runner)
	// Another process opens the window first; this one has never seen it.
	leader, err := newSubmitHandler(t, env).Executions.SubmitExecution(context.Background(), call)
	if err != nil || leader.CachedFrom != "" {
		t.Fatalf("the other process's call: %+v, %v", leader.Record(), err)
	}
	st, err := here.Executions.SubmitExecution(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if runner.last.Err == nil || runner.last.Recorded {
		t.Fatalf("the run-first commit was not refused on the window: %+v", runner.last)
	}
	if st.CachedFrom != leader.ID || st.ID == leader.ID {
		t.Fatalf("the call is %s, cached from %q; want a repeat of %s", st.ID, st.CachedFrom, leader.ID)
	}
	if bal, err := here.Billing.Balance(context.Background(), ws); err != nil || bal.Total() != billing.FromWhole(10) {
		t.Fatalf("balance %v (%v): the refused run-first call was charged", bal.Total(), err)
	}
}
