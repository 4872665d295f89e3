package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/testenv"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
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
	r := modules.Builtins(modules.BuiltinOptions{})
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
	cmds := commands.New(env.Store)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category}}, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ex := executor.New(cmds, projections.NewQueries(env.Pool), reg, hub, executor.Options{Worker: name, Concurrency: 16,
		SweepInterval: 100 * time.Millisecond, SweepGrace: 200 * time.Millisecond, RetryBackoff: 10 * time.Millisecond, Logger: quietLog()})
	return testenv.Go(t, ex.Run)
}

func submit(t *testing.T, cmds *commands.Handler, ws, module, input string, attempts int) execution.State {
	t.Helper()
	m, ok := registry(t).Get(module)
	cost := int64(1000)
	if ok {
		cost = m.CostMilli()
	}
	st, err := cmds.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: module,
		Input: json.RawMessage(input), Config: json.RawMessage(`{}`), Attempts: attempts, CostMilli: cost})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func waitTerminal(t *testing.T, cmds *commands.Handler, id string) execution.State {
	t.Helper()
	var st execution.State
	testenv.Eventually(t, 30*time.Second, "execution "+id+" to end", func() bool {
		var err error
		st, err = cmds.Execution(context.Background(), id)
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
	bal, err := env.Cmds.Balance(context.Background(), ws)
	if err != nil || bal.Total() != billing.FromWhole(9) {
		t.Fatalf("balance after one echo = %v (%v), want 9", bal.Total(), err)
	}
}

func TestFailingModuleUsesEveryAttempt(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	startExecutor(t, env, registry(t), "a")
	st, err := env.Cmds.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.fail",
		Input: json.RawMessage(`{}`), Config: json.RawMessage(`{"message":"nope"}`), Attempts: 3, CostMilli: 1000})
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
	if bal, _ := env.Cmds.Balance(context.Background(), ws); bal.Total() != billing.FromWhole(10) {
		t.Fatalf("a failed execution must not be billed: balance %v", bal.Total())
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
	ids := make([]string, n)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := env.Cmds.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "test.count",
				Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Config: json.RawMessage(`{}`), Attempts: 1, CostMilli: 1000})
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
	if bal, _ := env.Cmds.Balance(context.Background(), ws); bal.Total() != 0 {
		t.Fatalf("balance after %d charges of 1 = %v, want 0", n, bal.Total())
	}
}

func TestSweepTakesOverAfterLeaseRunsOut(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	st := submit(t, env.Cmds, ws, "core.echo", `{"a":1}`, 1)
	// A worker that dies right after claiming: its lease runs out at once.
	if _, err := env.Cmds.ClaimExecution(context.Background(), st.ID, "dead-worker", func(execution.State) time.Duration { return time.Millisecond }); err != nil {
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
		st, err := env.Cmds.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
			Input: json.RawMessage(input), Config: json.RawMessage(`{}`), Attempts: 1, CostMilli: 1000, CacheWindow: time.Minute})
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
