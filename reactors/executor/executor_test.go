package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/testenv"
)

// counter is a module that counts its runs per execution: the side effect that must happen
// once per execution however many executors compete.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *counter) module(t *testing.T) modules.Module {
	m, err := modules.NewModule(modules.Definition{Name: "test.count", CostMilli: 1000, Timeout: 5 * time.Second,
		Run: func(ctx context.Context, call modules.Call) (json.RawMessage, error) {
			c.mu.Lock()
			c.runs[call.ExecutionID]++
			c.mu.Unlock()
			return call.Input, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func registry(t *testing.T, extra ...modules.Module) *modules.Registry {
	r := modules.Builtins(modules.BuiltinsConfig{})
	for _, m := range extra {
		if err := r.Register(m); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	return l
}

// startExecutor runs an executor with its own command handler and hub on env's store, as a
// separate serve process would.
func startExecutor(t *testing.T, env *testenv.Env, reg *modules.Registry, name string) context.CancelFunc {
	t.Helper()
	_, stop := startInstance(t, env, reg, executor.Config{Worker: name, Concurrency: 16})
	return stop
}

// startInstance runs an executor as startExecutor does and returns the command handler of its
// process, on which submits are handed to it directly.
func startInstance(t *testing.T, env *testenv.Env, reg *modules.Registry, opts executor.Config) (*commands.Commands, context.CancelFunc) {
	t.Helper()
	return startInstanceOn(t, env, env.Store, reg, opts)
}

// startInstanceOn is startInstance with the process's commands appending through store.
func startInstanceOn(t *testing.T, env *testenv.Env, store eventstore.Store, reg *modules.Registry, opts executor.Config) (*commands.Commands, context.CancelFunc) {
	t.Helper()
	cmds, _, stop := runInstance(t, env, store, reg, opts)
	return cmds, stop
}

// runInstance runs an executor as startInstanceOn does and returns its process's command
// handler (its runner wired), the executor, and what stops it.
func runInstance(t *testing.T, env *testenv.Env, store eventstore.Store, reg *modules.Registry, opts executor.Config) (*commands.Commands, *executor.Executor, context.CancelFunc) {
	t.Helper()
	cmds := commands.New(store, commands.WithModules(reg))
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category}}, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	opts.SweepInterval, opts.SweepGrace = 100*time.Millisecond, 200*time.Millisecond
	if opts.RetryBackoff == 0 {
		opts.RetryBackoff = 10 * time.Millisecond
	}
	opts.Logger = quietLog()
	ex := executor.New(store, cmds, projections.NewQueries(env.Pool), reg, hub, opts)
	stop := testenv.Go(t, ex.Run)
	testenv.Eventually(t, 30*time.Second, "the executor to take submits", func() bool {
		return ex.Running()
	})
	return commands.WithRunner(cmds, ex), ex, stop
}

func submit(t *testing.T, cmds *commands.Commands, ws, module, input string, attempts int) execution.State {
	t.Helper()
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: module,
		Input: json.RawMessage(input), Config: json.RawMessage(`{}`), Attempts: attempts})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func waitTerminal(t *testing.T, cmds *commands.Commands, id string) execution.State {
	t.Helper()
	var st execution.State
	testenv.Eventually(t, 30*time.Second, "execution "+id+" to end", func() bool {
		var err error
		st, err = cmds.Executions.Execution(context.Background(), id)
		return err == nil && st.Status.Terminal()
	})
	return st
}

func TestEchoCompletesAndChargesOnce(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	startExecutor(t, env, registry(t), "a")
	st := submit(t, env.Cmds, ws, "core.echo", `{"hello":"world"}`, 1)
	done := waitTerminal(t, env.Cmds, st.ID)
	if done.Status != execution.StatusCompleted || !jsonEqual(done.Output, `{"hello":"world"}`) || done.TotalUsage != billing.FromWhole(1) {
		t.Fatalf("echo: %+v", done.Record())
	}
	bal, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || bal.Total() != billing.FromWhole(9) {
		t.Fatalf("balance after one echo = %v (%v), want 9", bal.Total(), err)
	}
}

func TestFailingModuleUsesEveryAttempt(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	startExecutor(t, env, registry(t), "a")
	st, err := env.Cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.fail",
		Input: json.RawMessage(`{}`), Config: json.RawMessage(`{"message":"nope"}`), Attempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	done := waitTerminal(t, env.Cmds, st.ID)
	if done.Status != execution.StatusFailed || done.FailedAttempts != 3 || done.Attempt != 3 {
		t.Fatalf("core.fail with attempts 3: status %s, failed attempts %d, attempt %d", done.Status, done.FailedAttempts, done.Attempt)
	}
	var f map[string]any
	if err := json.Unmarshal(done.Record().Error, &f); err != nil || f["message"] != "nope" {
		t.Fatalf("error of the failed execution: %s", done.Record().Error)
	}
	if bal, _ := env.Cmds.Billing.Balance(context.Background(), ws); bal.Total() != billing.FromWhole(10) {
		t.Fatalf("a failed execution must not be billed: balance %v", bal.Total())
	}
}

// A failed attempt waiting for its retry gives its slot back: with one slot and a retry an
// hour away, another call still runs.
func TestWaitingRetryHoldsNoSlot(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmds, _ := startInstance(t, env, registry(t), executor.Config{Worker: "a", Concurrency: 1, RetryBackoff: time.Hour})
	failing, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.fail",
		Input: json.RawMessage(`{}`), Config: json.RawMessage(`{}`), Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the first attempt to fail and wait for its retry", func() bool {
		st, err := cmds.Executions.Execution(context.Background(), failing.ID)
		return err == nil && !st.RetryAt.IsZero()
	})
	echo := submit(t, cmds, ws, "core.echo", `{"n":1}`, 1)
	if done := waitTerminal(t, cmds, echo.ID); done.Status != execution.StatusCompleted {
		t.Fatalf("echo beside a waiting retry: %+v", done.Record())
	}
	if st, _ := cmds.Executions.Execution(context.Background(), failing.ID); st.Status.Terminal() || st.RetryAt.IsZero() {
		t.Fatalf("the failing call should still wait for its retry: %s, retry at %v", st.Status, st.RetryAt)
	}
}

func TestCompetingExecutorsRunEachExecutionOnce(t *testing.T) {
	env := testenv.New(t)
	const n = 300
	ws := env.Workspace(t, n)
	c := &counter{runs: map[string]int{}}
	reg := registry(t, c.module(t))
	startExecutor(t, env, reg, "a")
	startExecutor(t, env, reg, "b")
	cmds := commands.New(env.Store, commands.WithModules(reg))
	ids := make([]string, n)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "test.count",
				Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Config: json.RawMessage(`{}`), Attempts: 1})
			if err != nil {
				failed.Add(1)
				return
			}
			ids[i] = st.ID
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d submits failed", failed.Load())
	}
	for _, id := range ids {
		if st := waitTerminal(t, env.Cmds, id); st.Status != execution.StatusCompleted {
			t.Fatalf("%s ended %s: %s", id, st.Status, st.Error)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if c.runs[id] != 1 {
			evs, _ := env.Store.ReadStream(context.Background(), "execution-"+id, 0, 100)
			for _, ev := range evs {
				t.Logf("%d %s %s %s", ev.Revision, ev.Type, ev.Position, ev.Data)
			}
			t.Fatalf("execution %s ran %d times, want once", id, c.runs[id])
		}
	}
	if bal, _ := env.Cmds.Billing.Balance(context.Background(), ws); bal.Total() != 0 {
		t.Fatalf("balance after %d charges of 1 = %v, want 0", n, bal.Total())
	}
}

func TestSweepTakesOverAfterLeaseRunsOut(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	st := submit(t, env.Cmds, ws, "core.echo", `{"a":1}`, 1)
	// A worker that dies right after claiming: its lease runs out at once.
	if _, err := env.Cmds.Attempts.ClaimExecution(context.Background(), st.ID, "dead-worker", func(execution.State) time.Duration { return time.Millisecond }); err != nil {
		t.Fatal(err)
	}
	startExecutor(t, env, registry(t), "survivor")
	done := waitTerminal(t, env.Cmds, st.ID)
	if done.Status != execution.StatusCompleted || done.Attempt != 1 {
		t.Fatalf("after takeover: status %s attempt %d", done.Status, done.Attempt)
	}
}

func TestCacheWindowRepeatIsFree(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	startExecutor(t, env, registry(t), "a")
	call := func(input string) execution.State {
		st, err := env.Cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
			Input: json.RawMessage(input), Config: json.RawMessage(`{}`), Attempts: 1, CacheWindow: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return waitTerminal(t, env.Cmds, st.ID)
	}
	first := call(`{"a":1,"b":2}`)
	again := call(`{"b":2, "a":1}`) // the same input, keys in another order
	other := call(`{"a":2}`)
	if first.TotalUsage != billing.FromWhole(1) || again.TotalUsage != 0 || other.TotalUsage != billing.FromWhole(1) {
		t.Fatalf("usage first %v, repeat %v, other %v; want 1, 0, 1", first.TotalUsage, again.TotalUsage, other.TotalUsage)
	}
	if string(again.Output) != string(first.Output) || again.CachedFrom != first.ID {
		t.Fatalf("repeat output %s from %s; want %s from %s", again.Output, again.CachedFrom, first.Output, first.ID)
	}
}

func jsonEqual(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
}

// gate is a module whose runs block until the test ends, counting the runs under way.
type gate struct {
	open    chan struct{}
	started atomic.Int32
}

func (g *gate) module(t *testing.T) modules.Module {
	m, err := modules.NewModule(modules.Definition{Name: "test.gate", CostMilli: 1000, Timeout: 10 * time.Minute,
		Run: func(ctx context.Context, call modules.Call) (json.RawMessage, error) {
			g.started.Add(1)
			select {
			case <-g.open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return call.Input, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(g.open) })
	return m
}

// One workspace's backlog holds at most its share of the slots: another workspace's call
// with waitForMs still runs at once.
func TestWorkspaceBacklogLeavesSlotsForOthers(t *testing.T) {
	env := testenv.New(t)
	g := &gate{open: make(chan struct{})}
	reg := registry(t, g.module(t))
	const slots, share = 8, 50
	cmds, _ := startInstance(t, env, reg, executor.Config{Worker: "a", Concurrency: slots, WorkspaceShare: share})
	busy, other := env.Workspace(t, 1000), env.Workspace(t, 10)
	for i := range 150 {
		if _, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: busy, Module: "test.gate",
			Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Config: json.RawMessage(`{}`), Attempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the busy workspace to fill its share", func() bool {
		return g.started.Load() == slots*share/100
	})
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: other, Module: "core.echo",
		Input: json.RawMessage(`{"x":1}`), Config: json.RawMessage(`{}`), Attempts: 1, WaitFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != execution.StatusCompleted {
		t.Fatalf("the other workspace's echo answered %s while the busy one's backlog waited", st.Status)
	}
	if n := g.started.Load(); n != slots*share/100 {
		t.Fatalf("the busy workspace runs %d calls at once, more than its share of %d", n, slots*share/100)
	}
}

// A submit with WaitFor on an instance running an executor is run there and answers with the
// ended execution, recorded once in the log.
func TestWaitingSubmitRunsOnTheAcceptingInstance(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmds, _ := startInstance(t, env, registry(t), executor.Config{Worker: "a", Concurrency: 4})
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
		Input: json.RawMessage(`{"hello":"world"}`), Config: json.RawMessage(`{}`), Attempts: 1, WaitFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != execution.StatusCompleted || !jsonEqual(st.Output, `{"hello":"world"}`) || st.TotalUsage != billing.FromWhole(1) {
		t.Fatalf("waiting submit answered %+v", st.Record())
	}
	evs, err := env.Store.ReadStream(context.Background(), commands.ExecutionStream(st.ID), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	if fmt.Sprint(types) != "[ExecutionSubmitted ExecutionCompleted]" { // run first: no claim to write
		t.Fatalf("events of the execution: %v", types)
	}
	if bal, _ := cmds.Billing.Balance(context.Background(), ws); bal.Total() != billing.FromWhole(9) {
		t.Fatalf("balance %v, want 9", bal.Total())
	}
}

// Two instances each run what they accepted: no claim is lost to the other.
func TestInstancesRunWhatTheyAcceptWithoutLosingClaims(t *testing.T) {
	env := testenv.New(t)
	const n = 100
	ws := env.Workspace(t, 2*n)
	c := &counter{runs: map[string]int{}}
	reg := registry(t, c.module(t))
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var handlers []*commands.Commands
	for i, name := range []string{"a", "b"} {
		h, _ := startInstance(t, env, reg, executor.Config{Worker: name, Concurrency: 16, TakeoverGrace: time.Hour, Registerer: regs[i]})
		handlers = append(handlers, h)
	}
	var ids [2][]string
	for i := range 2 * n {
		st, err := handlers[i%2].Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "test.count",
			Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Config: json.RawMessage(`{}`), Attempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids[i%2] = append(ids[i%2], st.ID)
	}
	for i, name := range []string{"a", "b"} {
		for _, id := range ids[i] {
			if st := waitTerminal(t, env.Cmds, id); st.Status != execution.StatusCompleted {
				t.Fatalf("%s: %s", id, st.Status)
			}
			var started execution.Started
			evs, err := env.Store.ReadStream(context.Background(), commands.ExecutionStream(id), 1, 1)
			if err != nil || len(evs) != 1 || json.Unmarshal(evs[0].Data, &started) != nil || started.Worker != name {
				t.Fatalf("%s accepted by %s was claimed by %q", id, name, started.Worker)
			}
		}
	}
	for i, reg := range regs {
		if lost := counterValue(t, reg, "switchyard_executor_claims_lost_total"); lost != 0 {
			t.Fatalf("instance %d lost %v claims", i, lost)
		}
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return executor.Series(t, reg, name).GetCounter().GetValue()
}

// An executor stopped while it starts (serve told to stop at once) stops cleanly: its
// context's end is not an error.
func TestStopDuringStartUpIsClean(t *testing.T) {
	env := testenv.New(t)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category}}, quietLog())
	ex := executor.New(env.Store, commands.New(env.Store), projections.NewQueries(env.Pool), registry(t), hub, executor.Config{Logger: quietLog()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ex.Run(ctx); err != nil {
		t.Fatalf("run stopped during start-up = %v, want nil", err)
	}
}

// txIDsOf returns the distinct transaction ids that wrote the execution's events and its charge.
func txIDsOf(t *testing.T, env *testenv.Env, ws, id string) []string {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT DISTINCT tx_id::text FROM events
		WHERE stream = $1 OR (stream = $2 AND type = 'CreditsCharged' AND data->>'cause' = $3)`,
		commands.ExecutionStream(id), commands.BillingStream(ws), "execution-"+id)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A waiting call of a repeatable module is written once: its submit, claim, completion and
// charge are one commit.
func TestWaitingRepeatableCallIsOneCommit(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmds, _ := startInstance(t, env, registry(t), executor.Config{Worker: "a", Concurrency: 4})
	ctx := commands.WithMetadata(context.Background(), commands.Metadata{Source: "test", RequestID: "req-1"})
	st, err := cmds.Executions.SubmitExecution(ctx, commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
		Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1, WaitFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != execution.StatusCompleted || st.TotalUsage != billing.FromWhole(1) {
		t.Fatalf("waiting submit answered %+v", st.Record())
	}
	if ids := txIDsOf(t, env, ws, st.ID); len(ids) != 1 {
		t.Fatalf("the call was written by %d transactions, want 1", len(ids))
	}
	evs, err := env.Store.ReadStream(context.Background(), commands.ExecutionStream(st.ID), 0, 10)
	if err != nil || len(evs) != 2 || evs[0].Type != "ExecutionSubmitted" || evs[1].Type != "ExecutionCompleted" {
		t.Fatalf("events of the call: %+v, %v; want the submit and the completion, no claim", evs, err)
	}
	if st.Attempt != 1 {
		t.Fatalf("attempt %d, want 1", st.Attempt)
	}
	if !strings.Contains(string(evs[0].Metadata), `"req-1"`) {
		t.Fatalf("the submit lost its request's metadata: %s", evs[0].Metadata)
	}
	if bal, _ := commands.New(env.Store).Billing.Balance(context.Background(), ws); bal.Total() != billing.FromWhole(9) {
		t.Fatalf("balance %v, want 9", bal.Total())
	}
}

// A call of a repeatable module that does not wait is written once too, and is answered as a
// call without waitForMs is (SPEC.md 4.1): CREATED, no output, nothing charged yet.
func TestRepeatableCallWithoutWaitIsOneCommit(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmds, _ := startInstance(t, env, registry(t), executor.Config{Worker: "a", Concurrency: 4})
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
		Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := st.Record()
	if st.Status != execution.StatusCreated || rec.Completed || string(rec.Output) != "null" || st.TotalUsage != 0 {
		t.Fatalf("submit without wait answered %+v", rec)
	}
	done := waitTerminal(t, env.Cmds, st.ID)
	if done.Status != execution.StatusCompleted || done.TotalUsage != billing.FromWhole(1) {
		t.Fatalf("the call ended %+v", done.Record())
	}
	if ids := txIDsOf(t, env, ws, st.ID); len(ids) != 1 {
		t.Fatalf("the call was written by %d transactions, want 1", len(ids))
	}
}

// A waiting repeatable call whose run fails takes the usual path: the failure is recorded and
// nothing is charged.
func TestWaitingRepeatableFailureTakesTheUsualPath(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	failing, err := modules.NewModule(modules.Definition{Name: "test.refuse", CostMilli: 1000, Timeout: 5 * time.Second, Repeatable: true,
		Run: func(ctx context.Context, call modules.Call) (json.RawMessage, error) {
			return nil, &modules.Failure{Code: "refused", Message: "no"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	cmds, _ := startInstance(t, env, registry(t, failing), executor.Config{Worker: "a", Concurrency: 4})
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "test.refuse",
		Input: json.RawMessage(`{}`), Config: json.RawMessage(`{}`), Attempts: 1, WaitFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != execution.StatusFailed || st.TotalUsage != 0 {
		t.Fatalf("failing waiting submit answered %+v", st.Record())
	}
	if bal, _ := commands.New(env.Store).Billing.Balance(context.Background(), ws); bal.Total() != billing.FromWhole(10) {
		t.Fatalf("balance %v after a failed call, want 10", bal.Total())
	}
}

// A waiting repeatable call that outlasts its wait answers in time, with an execution that
// exists, and is then recorded and charged once.
func TestWaitingCallSlowerThanItsWaitAnswersInTime(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	release := make(chan struct{})
	slow, err := modules.NewModule(modules.Definition{Name: "test.slow", CostMilli: 1000, Timeout: 30 * time.Second, Repeatable: true,
		Run: func(ctx context.Context, call modules.Call) (json.RawMessage, error) {
			select {
			case <-release:
				return call.Input, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	cmds, _ := startInstance(t, env, registry(t, slow), executor.Config{Worker: "a", Concurrency: 4})
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "test.slow",
		Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1, WaitFor: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Terminal() {
		t.Fatalf("the call ended before its module could: %+v", st.Record())
	}
	if _, err := commands.New(env.Store).Executions.Execution(context.Background(), st.ID); err != nil {
		t.Fatalf("the answered execution is not stored: %v", err)
	}
	close(release)
	done := waitTerminal(t, env.Cmds, st.ID)
	if done.Status != execution.StatusCompleted || done.TotalUsage != billing.FromWhole(1) {
		t.Fatalf("the slow call ended %+v", done.Record())
	}
	if bal, _ := commands.New(env.Store).Billing.Balance(context.Background(), ws); bal.Total() != billing.FromWhole(9) {
		t.Fatalf("balance %v, want 9: charged once", bal.Total())
	}
}

// gatedStore holds its first AppendMulti until open is closed, having closed entered.
type gatedStore struct {
	eventstore.Store
	once          sync.Once
	entered, open chan struct{}
}

func (g *gatedStore) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.open
	}
	return g.Store.AppendMulti(ctx, appends...)
}

// Calls waiting for their workspace's charge batch do not hold run slots: with one slot per
// workspace and the first batch held at the store, further calls still run at once, and
// each is then written by one commit. (With slots held until the commit, the other calls'
// runs waited for the first batch, or calls that do not wait took the two-commit path.)
func TestCallsWaitingForTheirChargeLeaveSlotsFree(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	var runs atomic.Int32
	count, err := modules.NewModule(modules.Definition{Name: "test.echo", CostMilli: 1000, Timeout: 5 * time.Second, Repeatable: true,
		Run: func(ctx context.Context, call modules.Call) (json.RawMessage, error) {
			runs.Add(1)
			return call.Input, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	gate := &gatedStore{Store: env.Store, entered: make(chan struct{}), open: make(chan struct{})}
	// Concurrency 2 at the default share of 50% gives each workspace one slot.
	cmds, _ := startInstanceOn(t, env, gate, registry(t, count), executor.Config{Worker: "a", Concurrency: 2})
	const calls = 5
	states := make([]execution.State, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	call := func(i int) {
		defer wg.Done()
		states[i], errs[i] = cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "test.echo",
			Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Config: json.RawMessage(`{}`), Attempts: 1, WaitFor: time.Minute})
	}
	wg.Add(1)
	go call(0)
	select {
	case <-gate.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the first call's charge batch never reached the store")
	}
	for i := 1; i < calls; i++ {
		wg.Add(1)
		go call(i)
	}
	release := sync.OnceFunc(func() { close(gate.open) })
	defer release() // a failed wait below must not leave the batch held
	testenv.Eventually(t, 10*time.Second, "every call to run while the first call's charge batch is held", func() bool {
		return runs.Load() == calls
	})
	release()
	wg.Wait()
	for i := range calls {
		if errs[i] != nil || states[i].Status != execution.StatusCompleted {
			t.Fatalf("call %d: %+v, %v", i, states[i].Record(), errs[i])
		}
		if ids := txIDsOf(t, env, ws, states[i].ID); len(ids) != 1 {
			t.Fatalf("call %d was written by %d transactions, want 1", i, len(ids))
		}
	}
}
