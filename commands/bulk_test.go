package commands_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/bulk"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// matched is a RunMatcher of fixed runs, standing for the runs read model.
type matched []string

func (m matched) MatchRuns(context.Context, bulk.Match) ([]string, error) { return m, nil }

// countEvents counts the events of stream that are like ev.
func countEvents(t *testing.T, h *commands.Commands, stream string, ev domain.Event) int {
	t.Helper()
	n := 0
	if _, err := h.Executions.ReadEvents(context.Background(), stream, 0, func(_ uint64, e domain.Event) error {
		if e.EventType() == ev.EventType() {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// advanceAll advances bulk id until it is COMPLETED.
func advanceAll(t *testing.T, h *commands.Commands, id string) bulk.State {
	t.Helper()
	for range 100 {
		st, err := h.Bulks.AdvanceBulk(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == bulk.StatusCompleted {
			return st
		}
	}
	t.Fatal("bulk did not complete")
	return bulk.State{}
}

// A bulk resumed after a crash that left runs acted on but unmarked marks them done without
// acting on them again: each run is cancelled once and re-run once. A run cancelled before the
// bulk began is a failure of the bulk's, not one of its cancels.
func TestABulkResumedAfterACrashActsOnEachRunOnce(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	h := commands.New(env.Store, commands.WithClock(clock))
	wf, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: mustDef(t, `{"name": "w",
		"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "e", "module": "core.echo"}], "edges": [{"from": "t", "to": "e"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 7 {
		runs, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID, Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, runs[0].RunID)
	}
	if _, err := h.Workflows.CancelRun(ctx, ids[6], "earlier"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	cancel, err := h.Bulks.StartBulk(ctx, commands.StartBulk{WorkspaceID: ws, WorkflowID: wf.ID, Action: bulk.ActionCancel, Reason: "bulk", Runs: matched(ids)})
	if err != nil {
		t.Fatal(err)
	}
	// The crash: the first three runs were cancelled by the bulk, which stopped before marking them.
	for _, id := range ids[:3] {
		if _, err := h.Workflows.CancelRun(ctx, id, "bulk"); err != nil {
			t.Fatal(err)
		}
	}
	restarted := commands.New(env.Store, commands.WithClock(clock)) // another process: nothing cached
	st := advanceAll(t, restarted, cancel.ID)
	if st.Done != 6 || st.Failed != 1 || len(st.Failures) != 1 || st.Failures[0].RunID != ids[6] {
		t.Fatalf("bulk cancel: done %d, failed %d, failures %+v", st.Done, st.Failed, st.Failures)
	}
	for _, id := range ids {
		if n := countEvents(t, restarted, commands.RunStream(id), run.CancelRequested{}); n != 1 {
			t.Fatalf("run %s cancelled %d times", id, n)
		}
	}

	now = now.Add(time.Second)
	rerun, err := restarted.Bulks.StartBulk(ctx, commands.StartBulk{WorkspaceID: ws, WorkflowID: wf.ID, Action: bulk.ActionRerun, Runs: matched(ids[:4])})
	if err != nil {
		t.Fatal(err)
	}
	// The crash: the first run's re-run was started, the bulk not told.
	if _, err := h.Workflows.RerunRun(ctx, commands.RerunRun{RunID: ids[0], NewRunID: bulk.RerunID(rerun.ID, ids[0])}); err != nil {
		t.Fatal(err)
	}
	if st := advanceAll(t, commands.New(env.Store, commands.WithClock(clock)), rerun.ID); st.Done != 4 || st.Failed != 0 {
		t.Fatalf("bulk rerun: done %d, failed %d %+v", st.Done, st.Failed, st.Failures)
	}
	for _, id := range ids[:4] {
		re, err := h.Workflows.Run(ctx, bulk.RerunID(rerun.ID, id))
		if err != nil || re.RerunOf != id {
			t.Fatalf("re-run of %s: %v %+v", id, err, re.RerunOf)
		}
		if n := countEvents(t, h, commands.RunStream(re.ID), run.Triggered{}); n != 1 {
			t.Fatalf("re-run of %s triggered %d times", id, n)
		}
	}
}
