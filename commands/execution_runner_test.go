package commands_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

// lateRunner is a runner whose every run first is recorded just after it gave up on it: it
// writes the call's submit and completion itself, then reports that it recorded nothing.
type lateRunner struct {
	t     *testing.T
	store eventstore.Store
}

func (r lateRunner) Running() bool { return true }

func (r lateRunner) Worker() string { return "late" }

func (r lateRunner) Take(st execution.State) <-chan execution.State { return nil }

func (r lateRunner) RunFirst(ctx context.Context, run commands.FirstRun, _ time.Duration) (execution.State, bool) {
	return r.TryRunFirst(ctx, run)
}

func (r lateRunner) TryRunFirst(ctx context.Context, run commands.FirstRun) (execution.State, bool) {
	st, create := run.State, run.Create
	done, err := execution.DecideCompleteFirst(st, r.Worker(), json.RawMessage(`{"n":1}`), billing.FromWhole(1), time.Now())
	if err != nil {
		r.t.Error(err)
		return st, false
	}
	var data []eventstore.EventData
	for _, e := range append(create, done...) {
		b, err := domain.Encode(e)
		if err != nil {
			r.t.Error(err)
			return st, false
		}
		data = append(data, eventstore.EventData{ID: uuid.New(), Type: e.EventType(), Data: b})
	}
	if _, err := r.store.Append(ctx, commands.ExecutionStream(st.ID), eventstore.NoStream(), data...); err != nil {
		r.t.Error(err)
	}
	return st, false
}

// A call without waitForMs whose run first was recorded after it gave up on it, just before its
// own submit, still answers as SPEC.md 4.1 says: CREATED, no output, nothing charged.
func TestCallWithoutWaitRecordedLateAnswersSubmitted(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	h := commands.WithRunner(commands.New(env.Store), lateRunner{t: t, store: env.Store})
	st, err := h.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
		Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rec := st.Record(); st.Status != execution.StatusCreated || rec.Completed || string(rec.Output) != "null" || st.TotalUsage != 0 {
		t.Fatalf("submit without wait answered %+v", rec)
	}
	stored, err := commands.New(env.Store).Executions.Execution(context.Background(), st.ID)
	if err != nil || stored.Status != execution.StatusCompleted {
		t.Fatalf("the late run is not what is stored: %+v, %v", stored, err)
	}
}
