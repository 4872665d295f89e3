package scheduler_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/testenv"
)

// linearEcho is a run of three core.echo stages (bench runs' workflow).
const linearEcho = `{"name": "linear-echo", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"}, {"id": "c", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "c"}]}`

// newLocalScheduler is a scheduler as serve wires it: holding the scheduler lock, running
// stages in runner (nil: none), reading unfinished runs through queries.
func newLocalScheduler(env *testenv.Env, runner commands.Runner, queries *projections.Queries, lock scheduler.LockFunc) *scheduler.Scheduler {
	return newSchedulerOn(env, commands.New(env.Store), runner, queries, lock)
}

// newSchedulerOn is newLocalScheduler issuing cmds.
func newSchedulerOn(env *testenv.Env, cmds *commands.Commands, runner commands.Runner, queries *projections.Queries, lock scheduler.LockFunc) *scheduler.Scheduler {
	if lock == nil {
		lock = func(ctx context.Context, fn func(context.Context) error) error {
			return projections.HoldLock(ctx, env.Pool.Config().ConnConfig, "scheduler", fn)
		}
	}
	return scheduler.New(env.Store, cmds, queries, scheduler.Config{Logger: quietLog(),
		SweepInterval: 100 * time.Millisecond, SweepGrace: 200 * time.Millisecond, Runner: runner, Lock: lock})
}

// serveLike starts an executor and a scheduler wired as serve wires them (the scheduler runs
// stages in the executor, triggers wake it, both share env.Cmds' states) and returns the
// commands to trigger runs with.
func serveLike(t testing.TB, env *testenv.Env) *commands.Commands {
	t.Helper()
	ex := startExecutor(t, env)
	s := newSchedulerOn(env, env.Cmds, ex, env.Queries, nil)
	testenv.Go(t, s.Run)
	return commands.WithRunWaker(commands.WithRunner(env.Cmds, ex), s.Wake)
}

// triggerVia starts a run of wf through cmds (wired with a scheduler's Wake or not).
func triggerVia(t testing.TB, cmds *commands.Commands, ws string, wf workflow.State) string {
	t.Helper()
	return triggerWith(t, cmds, ws, wf, `{"n": 1}`)
}

// triggerWith starts a run of wf with input through cmds.
func triggerWith(t testing.TB, cmds *commands.Commands, ws string, wf workflow.State, input string) string {
	t.Helper()
	runs, err := cmds.Workflows.TriggerWorkflow(context.Background(), commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID, Input: json.RawMessage(input)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("trigger: %v %v", runs, err)
	}
	return runs[0].RunID
}

// checkRuns waits for every run to complete with each stage executed and billed once.
func checkRuns(t *testing.T, env *testenv.Env, ws string, credits int64, ids []string) {
	t.Helper()
	stages := 0
	for _, id := range ids {
		st := waitRun(t, env, id)
		if st.Status != run.StatusCompleted || len(st.Stages) != 4 {
			t.Fatalf("run %s: %s with %d stages", id, st.Status, len(st.Stages))
		}
		for _, s := range st.Stages[1:] {
			ex, err := env.Cmds.Executions.Execution(context.Background(), s.ExecutionID)
			if err != nil || s.Status != run.StageStatusCompleted || ex.Attempt != 1 || !jsonEqual(s.Output, `{"n":1}`) {
				t.Fatalf("stage %+v, execution attempt %d: %v", s, ex.Attempt, err)
			}
			stages++
		}
	}
	b, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if want := credits*1000 - int64(stages)*1000; err != nil || int64(b.Total()) != want {
		t.Fatalf("balance %d (%v), want %d: each stage billed once", b.Total(), err, want)
	}
}

// The stages of a run go to this process's runner when the scheduler has one, and triggers
// wake the scheduler; each part alone, and neither, must still end every run, each stage
// executed and billed once (the fast paths are optimisations of the log's).
func TestRunsCompleteWithAndWithoutTheLocalPaths(t *testing.T) {
	for _, tc := range []struct {
		name         string
		runner, wake bool
	}{{"log only", false, false}, {"runner", true, false}, {"wake-up", false, true}, {"both", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.New(t)
			ws := env.Workspace(t, 100)
			ex := startExecutor(t, env)
			var runner commands.Runner
			if tc.runner {
				runner = ex
			}
			s := newLocalScheduler(env, runner, env.Queries, nil)
			testenv.Go(t, s.Run)
			cmds := env.Cmds
			if tc.wake {
				cmds = commands.WithRunWaker(cmds, s.Wake)
			}
			wf := create(t, env, ws, linearEcho)
			var ids []string
			for range 5 {
				ids = append(ids, triggerVia(t, cmds, ws, wf))
			}
			checkRuns(t, env, ws, 100, ids)
			// Only a stage run by the runner is submitted under its worker's name. (A stage the
			// runner gave up on, say on a database refusing connections under load, takes the
			// log's path: so some stage, not each, when the runner is wired.)
			ran := 0
			for _, id := range ids {
				st, _ := env.Cmds.Workflows.Run(context.Background(), id)
				for _, stage := range st.Stages[1:] {
					got, err := env.Cmds.Executions.Execution(context.Background(), stage.ExecutionID)
					if err != nil {
						t.Fatal(err)
					}
					if got.Runner == ex.Worker() {
						ran++
					}
				}
			}
			if (ran > 0) != tc.runner {
				t.Fatalf("%d stages run by the runner (executor %q), runner wired %v", ran, ex.Worker(), tc.runner)
			}
		})
	}
}

// A run triggered before the scheduler leads is stepped when it starts to. The scheduler here
// sweeps another database, so the run has nothing else to start it: the trigger was written
// before the scheduler's feed opened, and a sweep may not find it while projections lag.
func TestRunWokenBeforeTheSchedulerLeadsStarts(t *testing.T) {
	env := testenv.New(t)
	empty := testenv.New(t)
	ws := env.Workspace(t, 100)
	ex := startExecutor(t, env)
	release := make(chan struct{})
	s := newLocalScheduler(env, ex, empty.Queries, func(ctx context.Context, fn func(context.Context) error) error {
		select {
		case <-release:
			return fn(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	testenv.Go(t, s.Run)
	wf := create(t, env, ws, linearEcho)
	id := triggerVia(t, commands.WithRunWaker(env.Cmds, s.Wake), ws, wf)
	close(release)
	checkRuns(t, env, ws, 100, []string{id})
}

// Two instances, each with its executor and scheduler: one schedules, and runs triggered on
// either end with every stage executed and billed once, whichever instance's wake-up and
// runner they met.
func TestRunsCompleteAcrossTwoInstances(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	wf := create(t, env, ws, linearEcho)
	var instances []*commands.Commands
	for range 2 {
		ex := startExecutor(t, env)
		s := newLocalScheduler(env, ex, env.Queries, nil)
		testenv.Go(t, s.Run)
		instances = append(instances, commands.WithRunWaker(commands.WithRunner(commands.New(env.Store), ex), s.Wake))
	}
	var ids []string
	for i := range 10 {
		ids = append(ids, triggerVia(t, instances[i%2], ws, wf))
	}
	checkRuns(t, env, ws, 100, ids)
}

var _ commands.Runner = (*executor.Executor)(nil)

// A trigger's commit dispatches the run's first stages (commands' firstStep): the scheduler
// starts them from the run Wake hands it, or, when this process did not wake it, from the
// trigger the log brings, never waiting for a sweep. Sweeps here come once an hour, after the
// one when the lead starts: a run whose first stages waited for them would not end.
func TestATriggersDispatchIsStartedWithoutASweep(t *testing.T) {
	for _, tc := range []struct {
		name         string
		runner, wake bool
	}{{"log only", false, false}, {"runner", true, false}, {"wake-up", false, true}, {"both", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.New(t)
			ws := env.Workspace(t, 100)
			ex := startExecutor(t, env)
			var runner commands.Runner
			if tc.runner {
				runner = ex
			}
			s := scheduler.New(env.Store, env.Cmds, env.Queries, scheduler.Config{Logger: quietLog(),
				SweepInterval: time.Hour, SweepGrace: time.Hour, Runner: runner})
			testenv.Go(t, s.Run)
			cmds := env.Cmds
			if tc.wake {
				cmds = commands.WithRunWaker(cmds, s.Wake)
			}
			wf := create(t, env, ws, linearEcho)
			var ids []string
			for range 5 {
				ids = append(ids, triggerVia(t, cmds, ws, wf))
			}
			checkRuns(t, env, ws, 100, ids)
		})
	}
}

// A run triggered before the lead opens its feed, and not yet in the runs read model when
// the lead starts, is still started by the lead's first sweep: the lead waits for the read
// model to hold the triggers before its feed's head. Here the runs projector is held (its
// checkpoint row locked) until the lead is running, and sweeps come once an hour after it.
func TestARunTriggeredBeforeTheLeadAndNotProjectedIsStarted(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	wf := create(t, env, ws, linearEcho)
	startExecutor(t, env)
	ctx := context.Background()
	hold, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `INSERT INTO projection_checkpoints (name) VALUES ('runs') ON CONFLICT DO NOTHING;
		SELECT 1 FROM projection_checkpoints WHERE name = 'runs' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	id := triggerVia(t, env.Cmds, ws, wf)
	log := logrus.New()
	log.SetOutput(io.Discard)
	running := make(chan struct{})
	log.AddHook(&onMessage{message: "scheduler running", seen: running})
	s := scheduler.New(env.Store, env.Cmds, env.Queries, scheduler.Config{Logger: log, SweepInterval: time.Hour, SweepGrace: time.Hour})
	testenv.Go(t, s.Run)
	select {
	case <-running:
	case <-time.After(time.Minute):
		t.Fatal("the scheduler did not start leading")
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkRuns(t, env, ws, 100, []string{id})
}

// onMessage closes seen when an entry with message is logged.
type onMessage struct {
	message string
	seen    chan struct{}
	once    sync.Once
}

func (h *onMessage) Levels() []logrus.Level { return logrus.AllLevels }

func (h *onMessage) Fire(e *logrus.Entry) error {
	if e.Message == h.message {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

// A run whose stages are all repeatable built-ins, triggered where a runner and the scheduler
// run, is one commit: the trigger runs its first stage first, and the runner chains the stages
// after it into that stage's commit (commands.ChainNext). Each stage is executed and billed
// once. (A runner may give up under load, and its stages then take commits of their own: so
// some run, not each.)
func TestARunOfRepeatableStagesIsOneCommit(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	cmds := serveLike(t, env)
	wf := create(t, env, ws, linearEcho)
	var ids []string
	whole := 0
	for range 5 {
		id := triggerVia(t, cmds, ws, wf)
		st := waitRun(t, env, id)
		streams := []string{commands.RunStream(id)}
		for _, stage := range st.Stages[1:] {
			streams = append(streams, commands.ExecutionStream(stage.ExecutionID))
		}
		if len(env.Commits(t, streams...)) == 1 {
			whole++
		}
		ids = append(ids, id)
	}
	checkRuns(t, env, ws, 100, ids)
	if whole == 0 {
		t.Fatal("no run of three core.echo stages was written in one commit")
	}
}

// A chain ends before a stage whose module fails when run first: the stages before it are
// written in the chain's commit, and that stage, dispatched there, takes the usual path, where
// its attempts fail the run.
func TestAChainEndsBeforeAFailingStage(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	cmds := serveLike(t, env)
	wf := create(t, env, ws, `{"name": "breaks", "components": [
		{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"},
		{"id": "b", "module": "json.jq", "attempts": 2, "config": {"query": "error(\"boom\")"}}, {"id": "c", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "c"}]}`)
	st := waitRun(t, env, triggerVia(t, cmds, ws, wf))
	d := st.Detail()
	if d.Status != run.StatusFailed || len(d.RunStages) != 3 {
		t.Fatalf("run %s with %d stages, want FAILED with 3", d.Status, len(d.RunStages))
	}
	a, b := d.RunStages[1], d.RunStages[2]
	if a.Status != run.StageStatusCompleted || b.Status != run.StageStatusFailed || b.ExecutionAttempt != 2 || !strings.Contains(string(b.Error), "boom") {
		t.Fatalf("stage a %s, stage b %s after %d attempts: %s", a.Status, b.Status, b.ExecutionAttempt, b.Error)
	}
	bal, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || bal.Total() > billing.FromWhole(99) {
		t.Fatalf("balance %v (%v): stage a not billed", bal.Total(), err)
	}
}
