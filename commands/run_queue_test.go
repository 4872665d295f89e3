package commands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/testenv"
)

// Two processes settling one queue at once (a lead and one taking over, each with its own
// state cache) never give a slot twice: the queue's appends are at the revision read.
func TestConcurrentSettlesGiveNoSlotTwice(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	ws := env.Workspace(t, 100)
	var d workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "keyed", "concurrency": {"key": "payload.team", "limit": 3},
		"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := env.Cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 10 {
		runs, err := env.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID,
			Input: json.RawMessage(fmt.Sprintf(`{"team": "ops", "n": %d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, runs[0].RunID)
	}
	first, err := env.Cmds.Workflows.Run(ctx, ids[0])
	if err != nil || !first.Waiting() || first.ConcurrencyKey != "ops" {
		t.Fatalf("first run: waiting %v, key %q, %v", first.Waiting(), first.ConcurrencyKey, err)
	}
	queue := first.QueueID

	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted []string
	for range 2 {
		cmds := commands.New(env.Store)
		wg.Go(func() {
			for range 10 {
				got, err := cmds.RunQueues.Settle(ctx, queue, nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				admitted = append(admitted, got...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(admitted)
	want := slices.Sorted(slices.Values(ids[:3]))
	if !slices.Equal(admitted, want) {
		t.Fatalf("admitted %v, want the first three once each %v", admitted, want)
	}
	q, err := env.Cmds.RunQueues.Queue(ctx, queue)
	if err != nil || !slices.Equal(q.Running, ids[:3]) || !slices.Equal(q.Waiting, ids[3:]) {
		t.Fatalf("queue: %+v %v", q, err)
	}

	// The first run ends (cancelled): its slot goes to the fourth, in trigger order.
	if _, err := env.Cmds.Workflows.CancelRun(ctx, ids[0], ""); err != nil {
		t.Fatal(err)
	}
	got, err := env.Cmds.RunQueues.Settle(ctx, queue, []string{ids[0]})
	if err != nil || !slices.Equal(got, []string{ids[3]}) {
		t.Fatalf("after the first ended: admitted %v %v", got, err)
	}
	st, err := env.Cmds.Workflows.Run(ctx, ids[3])
	if err != nil || st.Waiting() || st.Status != run.StatusCreated {
		t.Fatalf("fourth run: waiting %v, %s, %v", st.Waiting(), st.Status, err)
	}
}

// A re-run of a run with a concurrency joins the line of its key: the original's key, or the
// one its new input gives.
func TestARerunJoinsItsKeysQueue(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	ws := env.Workspace(t, 100)
	var d workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "keyed", "concurrency": {"key": "team", "limit": 1},
		"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := env.Cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := env.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID, Input: json.RawMessage(`{"team": "ops"}`)})
	if err != nil {
		t.Fatal(err)
	}
	orig := runs[0].RunID
	if _, err := env.Cmds.Workflows.CancelRun(ctx, orig, ""); err != nil {
		t.Fatal(err)
	}
	same, err := env.Cmds.Workflows.RerunRun(ctx, commands.RerunRun{RunID: orig})
	if err != nil {
		t.Fatal(err)
	}
	other, err := env.Cmds.Workflows.RerunRun(ctx, commands.RerunRun{RunID: orig, Input: json.RawMessage(`{"team": "dev"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for id, key := range map[string]string{same.RunID: "ops", other.RunID: "dev"} {
		st, err := env.Cmds.Workflows.Run(ctx, id)
		if err != nil || !st.Waiting() || st.ConcurrencyKey != key {
			t.Fatalf("re-run %s: waiting %v, key %q (want %q), %v", id, st.Waiting(), st.ConcurrencyKey, key, err)
		}
		q, err := env.Cmds.RunQueues.Queue(ctx, st.QueueID)
		if err != nil || !slices.Contains(q.Waiting, id) {
			t.Fatalf("queue of %s: %+v %v", key, q, err)
		}
	}
	if _, err := env.Cmds.Workflows.RerunRun(ctx, commands.RerunRun{RunID: orig, Input: json.RawMessage(`{"team": {"a": [1, 2]}}`)}); err != nil {
		t.Fatalf("a non-string key: %v", err)
	}
}
