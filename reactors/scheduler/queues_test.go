package scheduler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

// appendTo appends events to stream as a store without atomic multi-stream appends may have
// left them: some parts of a commit written, the others lost.
func appendTo(t *testing.T, env *testenv.Env, stream string, events ...domain.Event) {
	t.Helper()
	var data []eventstore.EventData
	for _, e := range events {
		b, err := domain.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, eventstore.EventData{ID: uuid.New(), Type: e.EventType(), Data: b})
	}
	if _, err := env.Store.Append(context.Background(), stream, eventstore.Any(), data...); err != nil {
		t.Fatal(err)
	}
}

// A run whose join of its queue was lost, and a run its queue admitted whose RunAdmitted was
// lost (a KurrentDB AppendMulti cut short by a crash), are found by the scheduler's sweep and
// run to completion.
func TestSchedulerRepairsALostJoinAndALostAdmission(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	wf := create(t, env, ws, `{"name": "keyed", "concurrency": {"key": "team", "limit": 1},
		"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}]}`)
	triggered := func(key string) run.Triggered {
		id := uuid.NewString()
		events, err := run.DecideTrigger(run.State{}, id, ws, wf.ID, "", "t", wf.Definition, json.RawMessage(`{"team": "`+key+`"}`), key, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		tr := events[0].(run.Triggered)
		appendTo(t, env, commands.RunStream(id), tr)
		return tr
	}
	orphan := triggered("ops") // its join never written
	stuck := triggered("dev")  // joined and admitted, its RunAdmitted never written
	join, _ := run.JoinQueue(stuck)
	appendTo(t, env, commands.QueueStream(join.QueueID), join, run.QueueAdmitted{QueueID: join.QueueID, RunIDs: []string{stuck.RunID}, At: time.Now()})

	startExecutor(t, env)
	startScheduler(t, env)
	for _, id := range []string{orphan.RunID, stuck.RunID} {
		if st := waitRun(t, env, id); st.Status != run.StatusCompleted {
			t.Fatalf("run %s: %s %s", id, st.Status, st.Error)
		}
	}
}
