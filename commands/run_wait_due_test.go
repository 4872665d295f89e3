package commands_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// A wait read ahead of its due time (PrefetchDue) and fired with its run moved on meanwhile by
// another process (a signal it keeps) is decided again on the run as it is: the signal stays,
// and the wait ends once. A run neither read ahead nor cached is left to the caller's step.
func TestFireDueDecidesAgainOnARunThatMovedAfterItWasReadAhead(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 1)
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := commands.New(env.Store, commands.WithClock(clock))
	wf, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws,
		Definition: mustDef(t, `{"name": "hold", "components": [{"id": "t", "module": "ON_API_CALLED"},
			{"id": "w", "module": "WAIT", "config": {"for": "1m"}}], "edges": [{"from": "t", "to": "w"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		r, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := h.Workflows.StepRun(ctx, r[0].RunID, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r[0].RunID)
	}
	timer := commands.New(env.Store, commands.WithClock(clock)) // holds nothing of the runs but what it reads ahead
	timer.Waits.PrefetchDue(ctx, ids[:1])
	other := commands.New(env.Store)
	if _, err := other.Waits.Signal(ctx, commands.SignalRun{WorkspaceID: ws, RunID: ids[0], Name: "later", ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	fired := timer.Waits.FireDue(ctx, ids[:1])
	if len(fired) != 1 || fired[0].Err != nil || fired[0].State.Status != run.StatusCompleted || len(fired[0].State.Signals) != 1 {
		t.Fatalf("fired %+v: want the run completed, keeping the signal", fired)
	}
	events, err := env.Store.ReadStream(ctx, commands.RunStream(ids[0]), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	ends, signals := 0, 0
	for _, e := range events {
		var sc run.StageCompleted
		if e.Type == sc.EventType() && json.Unmarshal(e.Data, &sc) == nil && sc.Wait == run.WaitEndedTime {
			ends++
		}
		if e.Type == (run.SignalReceived{}).EventType() {
			signals++
		}
	}
	if ends != 1 || signals != 1 {
		t.Fatalf("the log holds %d wait ends and %d signals, want 1 and 1", ends, signals)
	}
	if f := timer.Waits.FireDue(ctx, ids[1:]); len(f) != 1 || f[0].Err == nil {
		t.Fatalf("fired %+v: want a run neither read ahead nor cached left to the caller", f)
	}
	if st, err := timer.Workflows.Run(ctx, ids[1]); err != nil || st.Status.Terminal() {
		t.Fatalf("run %s: %v, %v: want it still waiting", ids[1], st.Status, err)
	}
}
