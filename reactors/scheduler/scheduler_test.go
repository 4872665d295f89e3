package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/testenv"
)

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	return l
}

// startExecutor runs an executor as a serve process would.
func startExecutor(t testing.TB, env *testenv.Env) *executor.Executor {
	t.Helper()
	cmds := commands.New(env.Store)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category}}, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ex := executor.New(env.Store, cmds, projections.NewQueries(env.Pool), modules.Builtins(modules.BuiltinsConfig{}), hub,
		executor.Config{Concurrency: 32, SweepInterval: 100 * time.Millisecond, SweepGrace: 200 * time.Millisecond,
			RetryBackoff: 10 * time.Millisecond, Logger: quietLog()})
	testenv.Go(t, ex.Run)
	return ex
}

// startScheduler runs a scheduler holding the database's scheduler lock; cancel stops it.
func startScheduler(t testing.TB, env *testenv.Env) context.CancelFunc {
	t.Helper()
	return startSchedulerWithGrace(t, env, 200*time.Millisecond)
}

// startSchedulerWithGrace is startScheduler whose sweep leaves runs alone until they have been
// still for grace.
func startSchedulerWithGrace(t testing.TB, env *testenv.Env, grace time.Duration) context.CancelFunc {
	t.Helper()
	s := scheduler.New(env.Store, commands.New(env.Store), projections.NewQueries(env.Pool), scheduler.Config{Logger: quietLog(),
		SweepInterval: 100 * time.Millisecond, SweepGrace: grace,
		Lock: func(ctx context.Context, fn func(context.Context) error) error {
			return projections.HoldLock(ctx, env.Pool.Config().ConnConfig, "scheduler", fn)
		}})
	return testenv.Go(t, s.Run)
}

func create(t testing.TB, env *testenv.Env, ws, def string) workflow.State {
	t.Helper()
	var d workflow.Definition
	if err := json.Unmarshal([]byte(def), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func trigger(t testing.TB, env *testenv.Env, ws string, wf workflow.State, input string) string {
	t.Helper()
	runs, err := env.Cmds.Workflows.TriggerWorkflow(context.Background(), commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID, Input: json.RawMessage(input)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("trigger: %v %v", runs, err)
	}
	return runs[0].RunID
}

func waitRun(t testing.TB, env *testenv.Env, id string) run.State {
	t.Helper()
	var st run.State
	testenv.Eventually(t, 60*time.Second, "run "+id+" to end", func() bool {
		var err error
		st, err = env.Cmds.Workflows.Run(context.Background(), id)
		return err == nil && st.Status.Terminal()
	})
	return st
}

func forEach(n, concurrency int, body string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	return fmt.Sprintf(`{"name": "each-%d-%s", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": %d}},
		{"id": "work", "module": %q}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item"}}]}`, n, body, concurrency, body)
}

func itemsInput(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	return `{"items": [` + strings.Join(items, ",") + `]}`
}

func TestLinearRunCompletesWithEveryStageExecuted(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	startExecutor(t, env)
	startScheduler(t, env)
	wf := create(t, env, ws, `{"name": "linear", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "a", "module": "core.echo"},
		{"id": "b", "module": "json.jq", "config": {"query": "{doubled: (.x * 2)}"}},
		{"id": "c", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "c", "mapping": {"value": "doubled"}}]}`)
	st := waitRun(t, env, trigger(t, env, ws, wf, `{"x": 21}`))
	d := st.Detail()
	if d.Status != run.StatusCompleted || len(d.RunStages) != 4 || d.PendingStageCount != 0 || d.FailedStageCount != 0 {
		t.Fatalf("run %+v", d)
	}
	last := d.RunStages[3]
	if !jsonEqual(last.Output, `{"value":42}`) || last.ExecutionEventID == nil || last.ExecutionDispatchedAt == nil || last.ExecutionAttempt != 1 {
		t.Fatalf("last stage %+v output %s", last, last.Output)
	}
	var sum int64
	for _, s := range d.RunStages {
		sum += int64(s.CreditUsage)
	}
	if sum == 0 || int64(d.TotalUsage) != sum {
		t.Fatalf("totalUsage %d, stage sum %d", d.TotalUsage, sum)
	}
}

func TestForEachRunsEveryItemOnceAndResumesAfterTheSchedulerStops(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 1000)
	startExecutor(t, env)
	stop := startScheduler(t, env)
	wf := create(t, env, ws, forEach(60, 5, "core.echo"))
	id := trigger(t, env, ws, wf, itemsInput(60))
	testenv.Eventually(t, 30*time.Second, "some iterations to finish", func() bool {
		st, err := env.Cmds.Workflows.Run(context.Background(), id)
		return err == nil && st.TotalUsage >= 5000
	})
	stop() // a crash of the scheduling instance; another takes over from the log alone
	startScheduler(t, env)
	st := waitRun(t, env, id)
	if st.Status != run.StatusCompleted || st.TotalUsage != 60000 {
		t.Fatalf("run %s usage %s", st.Status, st.TotalUsage)
	}
	seen := map[int]bool{}
	for _, s := range st.Stages {
		if s.ComponentID != "work" {
			continue
		}
		if seen[s.Iteration] || s.Status != run.StageStatusCompleted || !jsonEqual(s.Output, fmt.Sprintf(`{"n":%d}`, s.Iteration)) {
			t.Fatalf("iteration stage %+v output %s", s, s.Output)
		}
		seen[s.Iteration] = true
	}
	if len(seen) != 60 {
		t.Fatalf("%d iterations", len(seen))
	}
	b, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || b.Total() != 1000000-60000 {
		t.Fatalf("balance %v %v: each iteration must be billed exactly once", b.Total(), err)
	}
}

func TestFailingStageFailsTheRunAfterItsAttempts(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	startExecutor(t, env)
	startScheduler(t, env)
	wf := create(t, env, ws, `{"name": "fails", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "bad", "module": "core.fail", "attempts": 3, "config": {"code": "boom"}},
		{"id": "never", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "bad"}, {"from": "bad", "to": "never"}]}`)
	st := waitRun(t, env, trigger(t, env, ws, wf, `{}`))
	d := st.Detail()
	if d.Status != run.StatusFailed || d.FailedStageCount != 1 || len(d.RunStages) != 2 || string(d.Error) == "null" {
		t.Fatalf("run %+v", d)
	}
	bad := d.RunStages[1]
	if bad.Status != run.StageStatusFailed || bad.ExecutionAttempt != 3 || !strings.Contains(string(bad.Error), "boom") {
		t.Fatalf("failed stage %+v error %s", bad, bad.Error)
	}
}

// A run's timeoutMs ends it at its deadline while its stage still runs, by the scheduler's
// timer: this scheduler's sweep would leave the run alone for an hour, and a step when the
// stage completes would record the stage COMPLETED rather than cancelled.
func TestRunTimesOutAtItsDeadlineWhileAStageRuns(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	startExecutor(t, env)
	startSchedulerWithGrace(t, env, time.Hour)
	// A run that completes shows the scheduler follows the log: one triggered before it did
	// would wait for a sweep, which this one's grace puts off for an hour.
	warm := create(t, env, ws, `{"name": "warm", "components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "a"}]}`)
	testenv.Eventually(t, 60*time.Second, "the scheduler to follow the log", func() bool {
		id := trigger(t, env, ws, warm, `{}`)
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if st, err := env.Cmds.Workflows.Run(context.Background(), id); err == nil && st.Status.Terminal() {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	})
	wf := create(t, env, ws, `{"name": "deadline", "timeoutMs": 200, "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "slow", "module": "core.delay", "config": {"ms": 3000}}],
	  "edges": [{"from": "t", "to": "slow"}]}`)
	st := waitRun(t, env, trigger(t, env, ws, wf, `{}`))
	d := st.Detail()
	if d.Status != run.StatusFailed || !strings.Contains(string(d.Error), `run_timeout`) || len(d.RunStages) != 2 {
		t.Fatalf("run %+v error %s", d, d.Error)
	}
	if slow := d.RunStages[1]; slow.Status != run.StageStatusFailed || !strings.Contains(string(slow.Error), `canceled`) {
		t.Fatalf("the running stage must be cancelled at the deadline: %+v error %s", slow, slow.Error)
	}
}

func TestDispatchedStageWithoutExecutionIsSubmittedOnReconcile(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	wf := create(t, env, ws, `{"name": "one", "components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}]}`)
	id := trigger(t, env, ws, wf, `{"k": 1}`)
	// A scheduler that died right after the trigger, which dispatched the stage in its commit:
	// the stage is on the run, its execution was never submitted.
	_, dispatched, err := triggerDispatched(context.Background(), env, id)
	if err != nil || len(dispatched) != 1 {
		t.Fatalf("step: %v %v", dispatched, err)
	}
	env.CaughtUp(t, "runs")
	startExecutor(t, env)
	startScheduler(t, env)
	st := waitRun(t, env, id)
	if st.Status != run.StatusCompleted || !jsonEqual(st.Stages[1].Output, `{"k":1}`) {
		t.Fatalf("run %+v", st.Detail())
	}
}

// A stage whose execution used all its attempts before the scheduler saw any of its events
// (a scheduler that took over, or a feed running behind its sweep) records the last attempt,
// not the first.
func TestSweptFailedStageRecordsItsLastAttempt(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	wf := create(t, env, ws, `{"name": "fails", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "bad", "module": "core.fail", "attempts": 3, "config": {"code": "boom"}}],
	  "edges": [{"from": "t", "to": "bad"}]}`)
	id := trigger(t, env, ws, wf, `{}`)
	st, dispatched, err := triggerDispatched(context.Background(), env, id)
	if err != nil || len(dispatched) != 1 {
		t.Fatalf("step: %v %v", dispatched, err)
	}
	if err := env.Cmds.Workflows.SubmitStage(context.Background(), &st, dispatched[0]); err != nil {
		t.Fatal(err)
	}
	startExecutor(t, env)
	testenv.Eventually(t, 60*time.Second, "the stage's execution to fail", func() bool {
		ex, err := env.Cmds.Executions.Execution(context.Background(), dispatched[0].ExecutionID)
		return err == nil && ex.Status == execution.StatusFailed
	})
	env.CaughtUp(t, "runs")
	startScheduler(t, env) // its feed opens after every event of the execution: only the sweep sees them
	ended := waitRun(t, env, id)
	d := ended.Detail()
	if d.Status != run.StatusFailed || len(d.RunStages) != 2 {
		t.Fatalf("run %+v", d)
	}
	if bad := d.RunStages[1]; bad.Status != run.StageStatusFailed || bad.ExecutionAttempt != 3 {
		t.Fatalf("failed stage %+v, want attempt 3", bad)
	}
}

// triggerDispatched is run id as its trigger's commit left it and the stages that commit
// dispatched (a run's first step goes into its trigger's commit): what a scheduler that died
// right after the trigger, before starting them, leaves behind.
func triggerDispatched(ctx context.Context, env *testenv.Env, id string) (run.State, []run.Stage, error) {
	st, err := env.Cmds.Workflows.Run(ctx, id)
	if err != nil {
		return st, nil, err
	}
	var dispatched []run.Stage
	for _, stage := range st.Stages {
		if stage.Status == run.StageStatusCreated && (stage.ExecutionID != "" || stage.ChildRunID != "") {
			dispatched = append(dispatched, stage)
		}
	}
	return st, dispatched, nil
}

func jsonEqual(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
