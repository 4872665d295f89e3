package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/testenv"
)

// startTasks runs an executor as a serve process would and returns it, for its task board.
func startTasks(t *testing.T, env *testenv.Env, opts executor.Config) *executor.Executor {
	t.Helper()
	_, ex, _ := runInstance(t, env, env.Store, registry(t), opts)
	return ex
}

// submitTask appends the submit of a workspace module's execution with a worker transport,
// as the submit of a registered module records it.
func submitTask(t *testing.T, env *testenv.Env, ws, module string, attempts int, costMilli int64) string {
	t.Helper()
	return submitTaskOf(t, env, ws, module, attempts, costMilli, execution.Transport{Type: execution.TransportWorker})
}

// submitTaskOf is submitTask with the module's transport as given.
func submitTaskOf(t *testing.T, env *testenv.Env, ws, module string, attempts int, costMilli int64, tr execution.Transport) string {
	t.Helper()
	id := uuid.NewString()
	raw, _ := json.Marshal(execution.Submitted{ExecutionID: id, WorkspaceID: ws, Module: module,
		Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: attempts, CostMilli: costMilli,
		Transport: &tr, At: time.Now().UTC()})
	if _, err := env.Store.Append(context.Background(), commands.ExecutionStream(id), eventstore.NoStream(),
		eventstore.EventData{ID: uuid.New(), Type: execution.Submitted{}.EventType(), Data: raw}); err != nil {
		t.Fatal(err)
	}
	return id
}

func poll(t *testing.T, ex *executor.Executor, ws, worker string, wait time.Duration, mods ...string) []executor.LeasedTask {
	t.Helper()
	tasks, err := ex.PollTasks(context.Background(), executor.TaskPoll{WorkspaceID: ws, Modules: mods, Max: 10, Wait: wait, WorkerID: worker})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// Two instances with a worker polling each: a task is leased to one of them once, its output
// lands through the other instance, charged once, and late calls for it answer not held.
func TestWorkerTaskLeasedOnceCompletedAnywhereChargedOnce(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	a := startTasks(t, env, executor.Config{Worker: "a"})
	b := startTasks(t, env, executor.Config{Worker: "b"})
	var wg sync.WaitGroup
	got := make([][]executor.LeasedTask, 2)
	for i, ex := range []*executor.Executor{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = poll(t, ex, ws, []string{"wa", "wb"}[i], 3*time.Second, "acme.resize")
		}()
	}
	testenv.Eventually(t, 10*time.Second, "both polls to wait", func() bool {
		return len(a.Workers(ws)) == 1 && len(b.Workers(ws)) == 1
	})
	id := submitTask(t, env, ws, "acme.resize", 2, 2000)
	wg.Wait()
	if n := len(got[0]) + len(got[1]); n != 1 {
		t.Fatalf("the task was leased %d times: %+v", n, got)
	}
	task := append(got[0], got[1]...)[0]
	if task.ExecutionID != id || task.Attempt != 1 || task.Module != "acme.resize" || !jsonEqual(task.Input, `{"n":1}`) || task.TaskID == "" {
		t.Fatalf("task: %+v", task)
	}
	caller := executor.TaskCaller{WorkspaceID: ws}
	if _, err := a.CompleteTask(context.Background(), executor.TaskCaller{WorkspaceID: "other"}, task.TaskID, json.RawMessage(`{}`)); !errors.Is(err, executor.ErrTaskNotFound) {
		t.Fatalf("another workspace's completion: %v", err)
	}
	if _, _, err := b.HeartbeatTask(context.Background(), caller, task.TaskID); err != nil {
		t.Fatal(err)
	}
	st, err := a.CompleteTask(context.Background(), caller, task.TaskID, json.RawMessage(`{"ok":true}`))
	if err != nil || st.Status != execution.StatusCompleted || string(st.Output) != `{"ok":true}` || st.TotalUsage != billing.Credits(2000) {
		t.Fatalf("completion: %+v %v", st.Record(), err)
	}
	if _, err := b.CompleteTask(context.Background(), caller, task.TaskID, json.RawMessage(`{}`)); !errors.Is(err, execution.ErrTaskNotHeld) {
		t.Fatalf("a second completion: %v", err)
	}
	if _, _, err := b.HeartbeatTask(context.Background(), caller, task.TaskID); !errors.Is(err, execution.ErrTaskNotHeld) {
		t.Fatalf("a heartbeat after completion: %v", err)
	}
	bal, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || bal.Total() != billing.FromWhole(8) {
		t.Fatalf("balance %v (%v), want 8", bal.Total(), err)
	}
}

// A lease not renewed is failed with lease_expired, and the next attempt goes to another
// worker; the first worker's late calls change nothing.
func TestWorkerTaskLeaseExpiresAndNextAttemptIsLeased(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ex := startTasks(t, env, executor.Config{Worker: "a", TaskLease: 300 * time.Millisecond})
	id := submitTask(t, env, ws, "acme.resize", 2, 1000)
	first := poll(t, ex, ws, "w1", 10*time.Second, "acme.resize")
	if len(first) != 1 || first[0].ExecutionID != id {
		t.Fatalf("first poll: %+v", first)
	}
	second := poll(t, ex, ws, "w2", 10*time.Second, "acme.resize")
	if len(second) != 1 || second[0].Attempt != 2 || second[0].TaskID == first[0].TaskID {
		t.Fatalf("after the lease ran out: %+v", second)
	}
	caller := executor.TaskCaller{WorkspaceID: ws}
	if _, err := ex.CompleteTask(context.Background(), caller, first[0].TaskID, json.RawMessage(`{}`)); !errors.Is(err, execution.ErrTaskNotHeld) {
		t.Fatalf("the expired lease's completion: %v", err)
	}
	if _, err := ex.FailTask(context.Background(), caller, second[0].TaskID, &modules.Failure{Code: "bad", Message: "no"}, false); err != nil {
		t.Fatal(err)
	}
	st, err := env.Cmds.Executions.Execution(context.Background(), id)
	if err != nil || st.Status != execution.StatusFailed || !strings.Contains(string(st.Error), `"bad"`) {
		t.Fatalf("after the final failure: %+v %v", st.Record(), err)
	}
	att, err := env.Cmds.Executions.ExecutionAttempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(att) != 2 || !strings.Contains(string(att[0].Error), execution.CodeLeaseExpired) || att[0].Worker != "w1" || att[1].Worker != "w2" {
		t.Fatalf("attempts: %+v", att)
	}
}

// A poll sees its own workspace's tasks only, and answers an empty list when its wait ends.
func TestWorkerPollSeesOwnWorkspaceOnly(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	other := env.Workspace(t, 10)
	ex := startTasks(t, env, executor.Config{Worker: "a"})
	submitTask(t, env, ws, "acme.resize", 1, 1000)
	if got := poll(t, ex, other, "w", 200*time.Millisecond, "acme.resize"); len(got) != 0 {
		t.Fatalf("another workspace leased %+v", got)
	}
	if got := poll(t, ex, ws, "w", 0, "acme.other"); len(got) != 0 {
		t.Fatalf("another module leased %+v", got)
	}
	if got := poll(t, ex, ws, "w", 10*time.Second, "acme.resize"); len(got) != 1 {
		t.Fatalf("own workspace: %+v", got)
	}
}

// countingStore counts the stream reads and appends made through it.
type countingStore struct {
	eventstore.Store
	reads, appends atomic.Int64
}

func (s *countingStore) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.RecordedEvent, error) {
	s.reads.Add(1)
	return s.Store.ReadStream(ctx, stream, from, max)
}

func (s *countingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	s.appends.Add(1)
	return s.Store.Append(ctx, stream, expected, events...)
}

// Polls waiting with nothing to lease do nothing: no reads, no appends, until their wait
// ends (they hold no timer that looks for work; the event that creates a task wakes them).
func TestIdlePollsReadNothing(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	store := &countingStore{Store: env.Store}
	_, ex, _ := runInstance(t, env, store, registry(t), executor.Config{Worker: "a"})
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := poll(t, ex, ws, fmt.Sprintf("idle-%d", i), 2*time.Second, "acme.idle"); len(got) != 0 {
				t.Errorf("an idle poll leased %+v", got)
			}
		}()
	}
	testenv.Eventually(t, 10*time.Second, "every poll to wait", func() bool { return len(ex.Workers(ws)) == n })
	reads, appends := store.reads.Load(), store.appends.Load()
	wg.Wait()
	if r, a := store.reads.Load()-reads, store.appends.Load()-appends; r != 0 || a != 0 {
		t.Fatalf("%d idle polls made %d reads and %d appends while they waited", n, r, a)
	}
}

// A module's concurrency bounds its tasks leased at once in the workspace.
func TestWorkerTasksRespectTheModulesConcurrency(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ex := startTasks(t, env, executor.Config{Worker: "a"})
	tr := execution.Transport{Type: execution.TransportWorker, Concurrency: 1}
	first := submitTaskOf(t, env, ws, "acme.one", 1, 1000, tr)
	testenv.Eventually(t, 10*time.Second, "the first task to be leased", func() bool {
		return len(poll(t, ex, ws, "w1", 0, "acme.one")) == 1
	})
	second := submitTaskOf(t, env, ws, "acme.one", 1, 1000, tr)
	if got := poll(t, ex, ws, "w2", 300*time.Millisecond, "acme.one"); len(got) != 0 {
		t.Fatalf("a second task leased beside the first with concurrency 1: %+v", got)
	}
	// A poll waiting while the module is at its bound is woken when a slot frees.
	waiting := make(chan []executor.LeasedTask, 1)
	go func() { waiting <- poll(t, ex, ws, "w3", 20*time.Second, "acme.one") }()
	testenv.Eventually(t, 10*time.Second, "the poll to wait", func() bool { return len(ex.Workers(ws)) == 3 })
	if _, err := ex.CompleteTask(context.Background(), executor.TaskCaller{WorkspaceID: ws}, execution.TaskID(first, 1), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	got := <-waiting
	if len(got) != 1 || got[0].ExecutionID != second {
		t.Fatalf("after the first ended: %+v", got)
	}
}

// WaitTasks answers once: with the task that woke it, or with none when its wait or its
// context ends.
func TestWaitTasksAnswersOnce(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ex := startTasks(t, env, executor.Config{Worker: "a"})
	wait := func(ctx context.Context, d time.Duration) chan []executor.LeasedTask {
		answers := make(chan []executor.LeasedTask, 2)
		ex.WaitTasks(ctx, executor.TaskPoll{WorkspaceID: ws, Modules: []string{"acme.async"}, Max: 5, Wait: d, WorkerID: "w"},
			func(tasks []executor.LeasedTask, err error) {
				if err != nil {
					t.Error(err)
				}
				answers <- tasks
			})
		return answers
	}
	woken := wait(context.Background(), 30*time.Second)
	id := submitTask(t, env, ws, "acme.async", 1, 1000)
	if got := <-woken; len(got) != 1 || got[0].ExecutionID != id {
		t.Fatalf("woken: %+v", got)
	}
	if got := <-wait(context.Background(), 50*time.Millisecond); len(got) != 0 {
		t.Fatalf("expired: %+v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := wait(ctx, time.Minute)
	cancel()
	if got := <-left; len(got) != 0 {
		t.Fatalf("after the caller left: %+v", got)
	}
	select {
	case extra := <-woken:
		t.Fatalf("a second answer: %+v", extra)
	default:
	}
}
