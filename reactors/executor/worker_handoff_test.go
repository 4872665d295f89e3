package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/testenv"
)

// registerWorkerModule registers a workspace module with a worker transport (price 1 credit).
func registerWorkerModule(t *testing.T, cmds *commands.Commands, ws, name string) {
	t.Helper()
	if _, err := cmds.Modules.Register(context.Background(), commands.RegisterModule{WorkspaceID: ws, Name: name,
		Transport: commands.ModuleTransport{Type: execution.TransportWorker}}); err != nil {
		t.Fatal(err)
	}
}

// waitPoll starts a poll waiting on ex's board as an HTTP/1 poll does (WaitTasks); the
// channel receives its answer.
func waitPoll(t *testing.T, ex *executor.Executor, ws, worker string, mods ...string) <-chan []executor.LeasedTask {
	t.Helper()
	ch := make(chan []executor.LeasedTask, 1)
	ex.WaitTasks(context.Background(), executor.TaskPoll{WorkspaceID: ws, Modules: mods, Max: 5, Wait: 30 * time.Second, WorkerID: worker},
		func(tasks []executor.LeasedTask, err error) {
			if err != nil {
				t.Error(err)
			}
			ch <- tasks
		})
	return ch
}

func answerOf(t *testing.T, ch <-chan []executor.LeasedTask) []executor.LeasedTask {
	t.Helper()
	select {
	case tasks := <-ch:
		return tasks
	case <-time.After(20 * time.Second):
		t.Fatal("the poll was not answered")
		return nil
	}
}

func submitCall(t *testing.T, cmds *commands.Commands, ws, module string) execution.State {
	t.Helper()
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: module,
		Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// streamEvents reads the execution's events.
func streamEvents(t *testing.T, env *testenv.Env, id string) []eventstore.RecordedEvent {
	t.Helper()
	evs, err := env.Store.ReadStream(context.Background(), commands.ExecutionStream(id), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// A submit with a worker's poll waiting in the same process leases the task to that worker
// in the submit's own commit, and the poll answers with it; the call is answered as submitted
// and completes, charged once, through the usual completion.
func TestSubmitLeasesToAWaitingPollInItsCommit(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmds, ex, _ := runInstance(t, env, env.Store, registry(t), executor.Config{Worker: "a"})
	registerWorkerModule(t, cmds, ws, "acme.resize")
	answer := waitPoll(t, ex, ws, "w1", "acme.resize")
	st := submitCall(t, cmds, ws, "acme.resize")
	if st.Status != execution.StatusCreated {
		t.Fatalf("the submit's answer: %+v", st.Record())
	}
	tasks := answerOf(t, answer)
	if len(tasks) != 1 || tasks[0].ExecutionID != st.ID || tasks[0].Attempt != 1 || !jsonEqual(tasks[0].Input, `{"n":1}`) {
		t.Fatalf("the poll's answer: %+v", tasks)
	}
	evs := streamEvents(t, env, st.ID)
	if len(evs) != 2 || evs[0].Type != (execution.Submitted{}).EventType() || evs[1].Type != (execution.Started{}).EventType() {
		t.Fatalf("events: %+v", evs)
	}
	if evs[0].Position.Commit != evs[1].Position.Commit {
		t.Fatalf("the lease was committed apart from the submit: %+v, %+v", evs[0].Position, evs[1].Position)
	}
	var started execution.Started
	if err := json.Unmarshal(evs[1].Data, &started); err != nil || started.Worker != "w1" || !started.LeaseUntil.Equal(tasks[0].LeaseExpiresAt) {
		t.Fatalf("lease: %+v %v, task %+v", started, err, tasks[0])
	}
	done, err := ex.CompleteTask(context.Background(), executor.TaskCaller{WorkspaceID: ws}, tasks[0].TaskID, json.RawMessage(`{"ok":true}`))
	if err != nil || done.Status != execution.StatusCompleted || done.TotalUsage != billing.FromWhole(1) {
		t.Fatalf("completion: %+v %v", done.Record(), err)
	}
	bal, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || bal.Total() != billing.FromWhole(9) {
		t.Fatalf("balance %v (%v), want 9", bal.Total(), err)
	}
}

// A submit on an instance where no poll waits goes on the log, and a poll waiting on another
// instance leases it there; the completion lands through the first instance.
func TestSubmitWithAPollOnAnotherInstanceIsLeasedThere(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmdsA, exA, _ := runInstance(t, env, env.Store, registry(t), executor.Config{Worker: "a"})
	_, exB, _ := runInstance(t, env, env.Store, registry(t), executor.Config{Worker: "b"})
	registerWorkerModule(t, cmdsA, ws, "acme.resize")
	answer := waitPoll(t, exB, ws, "wb", "acme.resize")
	st := submitCall(t, cmdsA, ws, "acme.resize")
	tasks := answerOf(t, answer)
	if len(tasks) != 1 || tasks[0].ExecutionID != st.ID {
		t.Fatalf("the poll on the other instance: %+v", tasks)
	}
	evs := streamEvents(t, env, st.ID)
	if len(evs) != 2 || evs[1].Type != (execution.Started{}).EventType() || evs[0].Position.Commit == evs[1].Position.Commit {
		t.Fatalf("events: %+v", evs)
	}
	done, err := exA.CompleteTask(context.Background(), executor.TaskCaller{WorkspaceID: ws}, tasks[0].TaskID, json.RawMessage(`{}`))
	if err != nil || done.Status != execution.StatusCompleted {
		t.Fatalf("completion through the first instance: %+v %v", done.Record(), err)
	}
}

// A completion decided on the state this process recorded when it leased the task, after
// another instance failed the lease meanwhile, is refused (not held) and charges nothing:
// the charge goes only with the outcome (ChargedFinish.Combined).
func TestCompletionOfALeaseLostElsewhereChargesNothing(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmds, ex, _ := runInstance(t, env, env.Store, registry(t), executor.Config{Worker: "a"})
	registerWorkerModule(t, cmds, ws, "acme.resize")
	answer := waitPoll(t, ex, ws, "w1", "acme.resize")
	st := submitCall(t, cmds, ws, "acme.resize")
	tasks := answerOf(t, answer)
	if len(tasks) != 1 {
		t.Fatalf("poll: %+v", tasks)
	}
	// Another instance whose clock is past the lease fails it (lease_expired).
	later := commands.New(env.Store, commands.WithClock(func() time.Time { return time.Now().Add(time.Hour) }))
	if _, err := later.Attempts.ExpireTask(context.Background(), st.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.CompleteTask(context.Background(), executor.TaskCaller{WorkspaceID: ws}, tasks[0].TaskID, json.RawMessage(`{}`)); !errors.Is(err, execution.ErrTaskNotHeld) {
		t.Fatalf("completion of a lost lease: %v", err)
	}
	bal, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || bal.Total() != billing.FromWhole(10) {
		t.Fatalf("balance %v (%v), want 10: the lost lease's completion was charged", bal.Total(), err)
	}
}

// The submit that leases to a waiting poll takes its request's signature claim in that same
// commit, with no round trip of its own; a replay of it (the claim held by another request)
// is refused with nothing written, and the poll it had reserved takes the next call.
func TestHandedOffSubmitTakesItsClaimInItsCommit(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmds, ex, _ := runInstance(t, env, env.Store, registry(t), executor.Config{Worker: "a"})
	registerWorkerModule(t, cmds, ws, "acme.resize")
	until := time.Now().Add(time.Hour)
	noRoundTrip := func(context.Context) (bool, error) {
		t.Error("the claim was settled by a round trip of its own")
		return false, nil
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	call := func(claim *commands.RequestClaim) (execution.State, error) {
		return cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "acme.resize",
			Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1, Claim: claim})
	}
	first := waitPoll(t, ex, ws, "w1", "acme.resize")
	st, err := call(commands.NewRequestClaim(key, []byte("owner-1"), until, noRoundTrip))
	if err != nil {
		t.Fatal(err)
	}
	if tasks := answerOf(t, first); len(tasks) != 1 || tasks[0].ExecutionID != st.ID {
		t.Fatalf("first poll: %+v", tasks)
	}
	second := waitPoll(t, ex, ws, "w2", "acme.resize")
	replay, err := call(commands.NewRequestClaim(key, []byte("owner-2"), until, noRoundTrip))
	if !errors.Is(err, commands.ErrReplayed) {
		t.Fatalf("the replay: %+v %v", replay.Record(), err)
	}
	select {
	case tasks := <-second:
		t.Fatalf("the replay reached a worker: %+v", tasks)
	default:
	}
	next, err := call(commands.NewRequestClaim([]byte("fedcba9876543210fedcba9876543210"), []byte("owner-3"), until, noRoundTrip))
	if err != nil {
		t.Fatal(err)
	}
	if tasks := answerOf(t, second); len(tasks) != 1 || tasks[0].ExecutionID != next.ID {
		t.Fatalf("second poll: %+v", tasks)
	}
}
