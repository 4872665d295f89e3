package commands_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
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
	if r.before != nil {
		r.before(run)
	}
	res, err := r.cmds.Charges.ChargeAndFinish(ctx, st.WorkspaceID, []commands.ChargedFinish{echoed(run, r.Worker())})
	if err != nil {
		return st, false
	}
	r.last = res[0]
	return res[0].State, res[0].Recorded
}

// echoed is the charged finish of a call run first whose module echoed its input.
func echoed(run commands.FirstRun, worker string) commands.ChargedFinish {
	st := run.State
	usage := billing.Credits(st.CostMilli)
	return commands.ChargedFinish{ExecutionID: st.ID,
		Charge:  commands.ChargeRequest{Cause: "execution-" + st.ID, Amount: usage},
		Outcome: commands.Outcome{Worker: worker, Output: st.Input, Usage: usage},
		Create:  run.Create, Claim: run.Claim, Window: run.Window, Step: run.Step}
}

// batchRunner records the calls run first in one charge batch once n of them have come, as the
// executor gathers a workspace's finished calls into its next batch.
type batchRunner struct {
	recordingRunner
	n       int
	mu      sync.Mutex
	runs    []commands.FirstRun
	results []commands.FinishResult
	done    chan struct{}
}

func (r *batchRunner) TryRunFirst(ctx context.Context, run commands.FirstRun) (execution.State, bool) {
	return r.RunFirst(ctx, run, time.Second)
}

func (r *batchRunner) RunFirst(ctx context.Context, run commands.FirstRun, _ time.Duration) (execution.State, bool) {
	r.mu.Lock()
	i := len(r.runs)
	r.runs = append(r.runs, run)
	if len(r.runs) == r.n {
		items := make([]commands.ChargedFinish, r.n)
		for j, run := range r.runs {
			items[j] = echoed(run, r.Worker())
		}
		r.results, _ = r.cmds.Charges.ChargeAndFinish(ctx, run.State.WorkspaceID, items)
		close(r.done)
	}
	r.mu.Unlock()
	<-r.done
	if r.results == nil {
		return run.State, false
	}
	return r.results[i].State, r.results[i].Recorded
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

// windowsOpenedElsewhere has another process open the windows of n distinct core.echo calls
// of a new workspace ws with 100 credits, returning the call for each and the leader that
// opened its window.
func windowsOpenedElsewhere(t *testing.T, n int) (env *testenv.Env, ws string, call func(int) commands.SubmitExecution, leaders []execution.State) {
	t.Helper()
	env = testenv.New(t)
	ws = env.Workspace(t, 100)
	call = func(i int) commands.SubmitExecution {
		return commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo", Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Config: json.RawMessage(`{}`), Attempts: 1, CacheWindow: time.Minute, WaitFor: 5 * time.Second}
	}
	there := &recordingRunner{cmds: newSubmitHandler(t, env)}
	other := commands.WithRunner(there.cmds, there)
	leaders = make([]execution.State, n)
	for i := range n {
		var err error
		if leaders[i], err = other.Executions.SubmitExecution(context.Background(), call(i)); err != nil || leaders[i].Status != execution.StatusCompleted {
			t.Fatalf("leader %d: %+v, %v", i, leaders[i].Record(), err)
		}
	}
	return env, ws, call, leaders
}

// Calls of windows another process opened, run first here (which never saw those windows) and
// gathered in one charge batch, are refused once, not once each: the batch reads the windows it
// guessed and leaves out every call whose window is open. Each call is then its window's free
// repeat, recorded complete in one commit with its leader's output.
func TestABatchOfCallsInWindowsOpenedElsewhereIsRefusedOnce(t *testing.T) {
	const n = 4
	env, ws, call, leaders := windowsOpenedElsewhere(t, n)
	ctx := context.Background()
	store := &watchedStore{Store: env.Store}
	runner := &batchRunner{recordingRunner: recordingRunner{cmds: commands.New(store)}, n: n, done: make(chan struct{})}
	here := commands.WithRunner(runner.cmds, runner)
	repeats := make([]execution.State, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var err error
			repeats[i], err = here.Executions.SubmitExecution(ctx, call(i))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if tries := store.appendsTo(commands.BillingStream(ws)); tries != 1 {
		t.Fatalf("the batch was tried %d times, want once", tries)
	}
	for i, st := range repeats {
		if st.CachedFrom != leaders[i].ID || st.Status != execution.StatusCompleted || st.TotalUsage != 0 || !sameJSON(st.Output, leaders[i].Output) {
			t.Fatalf("repeat %d: %+v; want completed free from %s with %s", i, st.Record(), leaders[i].ID, leaders[i].Output)
		}
		if events, err := env.Store.ReadStream(ctx, commands.ExecutionStream(st.ID), 0, 10); err != nil || len(events) != 2 {
			t.Fatalf("repeat %d's stream holds %d events (%v), want its submit and completion", i, len(events), err)
		}
	}
	if bal, err := here.Billing.Balance(ctx, ws); err != nil || bal.Total() != billing.FromWhole(100-n) {
		t.Fatalf("balance %v (%v), want %d: only the leaders bill", bal.Total(), err, 100-n)
	}
}

// A process that learned from the log the windows another opened (Windows.Learn, as
// reactors/windows does) answers identical calls as free repeats at once: no charge batch tried
// and refused on a window, no window read.
func TestCallsInWindowsLearnedFromTheLogAreFreeWithoutARefusal(t *testing.T) {
	const n = 4
	env, ws, call, leaders := windowsOpenedElsewhere(t, n)
	ctx := context.Background()
	store := &watchedStore{Store: env.Store}
	runner := &recordingRunner{cmds: commands.New(store)}
	here := commands.WithRunner(runner.cmds, runner)
	opened, err := env.Store.ReadAll(ctx, eventstore.Start, 100, eventstore.Filter{Types: []string{execution.CacheWindowOpened{}.EventType()}})
	if err != nil || len(opened) != n {
		t.Fatalf("%d windows opened (%v), want %d", len(opened), err, n)
	}
	for _, rec := range opened {
		if err := here.Windows.Learn(rec); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		st, err := here.Executions.SubmitExecution(ctx, call(i))
		if err != nil || st.CachedFrom != leaders[i].ID || st.Status != execution.StatusCompleted || st.TotalUsage != 0 {
			t.Fatalf("repeat %d: %+v, %v; want completed free from %s", i, st.Record(), err, leaders[i].ID)
		}
	}
	if tries := store.appendsTo(commands.BillingStream(ws)); tries != 0 {
		t.Fatalf("charge batches tried %d times, want none: every call was known free", tries)
	}
	for _, rec := range opened {
		if store.read(rec.Stream) {
			t.Fatalf("window %s read: it was known", rec.Stream)
		}
	}
	if err := here.Windows.Learn(eventstore.RecordedEvent{Stream: commands.BillingStream(ws)}); err == nil {
		t.Fatal("a billing stream's event learned as a window")
	}
	// A window known as of its event is not decoded again (its bytes, spoilt here, are not
	// read), as every window a process opened itself comes back to it; one past what the
	// process knows is decoded.
	spoilt := opened[0]
	spoilt.Data = []byte("{")
	if err := here.Windows.Learn(spoilt); err != nil {
		t.Fatalf("a window known at its revision was decoded again: %v", err)
	}
	spoilt.Revision++
	if err := here.Windows.Learn(spoilt); err == nil {
		t.Fatal("a window's event past what the process knows was not decoded")
	}
}

// sameJSON reports whether a and b are the same JSON text but for insignificant space.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// Executions and their events get time-ordered IDs (UUIDv7): each is a key of B-tree indexes,
// where a random one sends every insert to a random page (commands.newID).
func TestExecutionsAndEventsGetTimeOrderedIDs(t *testing.T) {
	env := testenv.New(t)
	h := newSubmitHandler(t, env)
	ws := env.Workspace(t, 10)
	var ids []uuid.UUID
	for n := range 3 {
		st, err := h.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
			Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), Config: json.RawMessage(`{}`), Attempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		id, err := uuid.Parse(st.ID)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		rows, err := env.Pool.Query(context.Background(), `SELECT event_id FROM events WHERE stream = $1 ORDER BY revision`, "execution-"+st.ID)
		if err != nil {
			t.Fatal(err)
		}
		events, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil || len(events) == 0 {
			t.Fatalf("events of %s: %v, %v", st.ID, events, err)
		}
		ids = append(ids, events...)
	}
	for i, id := range ids {
		if id.Version() != 7 {
			t.Fatalf("ID %s is version %d, want 7", id, id.Version())
		}
		if i > 0 && bytes.Compare(ids[i-1][:6], id[:6]) > 0 {
			t.Fatalf("ID %s sorts before the earlier %s", id, ids[i-1])
		}
	}
}
