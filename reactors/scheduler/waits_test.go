package scheduler_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/testenv"
)

// TestWaitsReadModelHoldsOpenWaitsByDueTime: a waiting stage is in run_waits with its due
// time until it ends, and the lead loads it from there alone: a scheduler started after the
// wait began (nothing of it in memory) ends it when it is due.
func TestWaitsReadModelHoldsOpenWaitsByDueTime(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	wf := create(t, env, ws, `{"name": "hold", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"for": "2s"}}], "edges": [{"from": "t", "to": "w"}]}`)
	ctx := context.Background()
	cmds := commands.New(env.Store)
	r, err := cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cmds.Workflows.StepRun(ctx, r[0].RunID, nil); err != nil {
		t.Fatal(err)
	}
	var due []time.Time
	testenv.Eventually(t, 10*time.Second, "the wait in the read model", func() bool {
		ws, err := env.Queries.DueWaits(ctx, time.Now().Add(time.Hour), 10)
		if err != nil {
			t.Fatal(err)
		}
		due = due[:0]
		for _, w := range ws {
			if w.RunID == r[0].RunID {
				due = append(due, w.DueAt)
			}
		}
		return len(due) == 1
	})
	if d := time.Until(due[0]); d <= 0 || d > 2*time.Second {
		t.Fatalf("due in %s, want within 2s", d)
	}
	startScheduler(t, env)
	testenv.Eventually(t, 20*time.Second, "the run to end", func() bool {
		st, err := env.Cmds.Workflows.Run(ctx, r[0].RunID)
		return err == nil && st.Status.Terminal()
	})
	testenv.Eventually(t, 10*time.Second, "the wait to leave the read model", func() bool {
		n, err := env.Queries.OpenWaits(ctx)
		return err == nil && n == 0
	})
}

// TestSweepLeavesRunsThatOnlyWait: the sweep's list of stalled runs leaves out a run whose open
// stages all wait (its timers step it; thousands would crowd the list), and keeps one that
// also has a module stage open beside its wait.
func TestSweepLeavesRunsThatOnlyWait(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ctx := context.Background()
	only := create(t, env, ws, `{"name": "only", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"signal": {"name": "go"}}}], "edges": [{"from": "t", "to": "w"}]}`)
	beside := create(t, env, ws, `{"name": "beside", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"signal": {"name": "go"}}}, {"id": "a", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "w"}, {"from": "t", "to": "a"}]}`)
	cmds := commands.New(env.Store)
	var ids []string
	for _, wf := range []string{only.ID, beside.ID} {
		r, err := cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := cmds.Workflows.StepRun(ctx, r[0].RunID, nil); err != nil { // no executor: a stays open
			t.Fatal(err)
		}
		ids = append(ids, r[0].RunID)
	}
	env.CaughtUp(t, "runs")
	got, err := env.Queries.UnfinishedRuns(ctx, time.Now().Add(time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got, ids[0]) || !slices.Contains(got, ids[1]) {
		t.Fatalf("unfinished runs %v: want %s (a module stage beside its wait) and not %s (only waits)", got, ids[1], ids[0])
	}
}

// TestSweepFindsARunOnceItsWaitEnds: the count of a run's waits the sweep relies on goes down
// when a wait ends, so a run whose signal came and whose next stage is open is swept again; a
// runs table from before the count is counted when migrated.
func TestSweepFindsARunOnceItsWaitEnds(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ctx := context.Background()
	wf := create(t, env, ws, `{"name": "then", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"signal": {"name": "go"}}}, {"id": "a", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "w"}, {"from": "w", "to": "a"}]}`)
	cmds := commands.New(env.Store)
	var ids []string
	for range 2 {
		r, err := cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := cmds.Workflows.StepRun(ctx, r[0].RunID, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r[0].RunID)
	}
	swept := func() []string {
		env.CaughtUp(t, "runs")
		got, err := env.Queries.UnfinishedRuns(ctx, time.Now().Add(time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := swept(); slices.Contains(got, ids[0]) || slices.Contains(got, ids[1]) {
		t.Fatalf("unfinished runs %v hold a run that only waits", got)
	}
	// A table migrated from before the count: the waiting runs are counted, not swept.
	if _, err := env.Pool.Exec(ctx, `ALTER TABLE runs DROP COLUMN waiting_stages`); err != nil {
		t.Fatal(err)
	}
	if err := projections.Migrate(ctx, env.Pool, []projections.Projector{projections.Runs{}}); err != nil {
		t.Fatal(err)
	}
	if got := swept(); slices.Contains(got, ids[0]) || slices.Contains(got, ids[1]) {
		t.Fatalf("after migrating, unfinished runs %v hold a run that only waits", got)
	}
	if _, err := cmds.Waits.Signal(ctx, commands.SignalRun{WorkspaceID: ws, RunID: ids[0], Name: "go"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cmds.Workflows.StepRun(ctx, ids[0], nil); err != nil { // no executor: a stays open
		t.Fatal(err)
	}
	if got := swept(); !slices.Contains(got, ids[0]) || slices.Contains(got, ids[1]) {
		t.Fatalf("unfinished runs %v: want %s (its wait ended, a open) and not %s (waiting)", got, ids[0], ids[1])
	}
}

// TestTwoLeadingSchedulersEndAWaitOnce: two schedulers that both lead (no lock) fire the same
// waits; each wait's end is in the log once, the run stream's expected revision refusing the
// second.
func TestTwoLeadingSchedulersEndAWaitOnce(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ctx := context.Background()
	wf := create(t, env, ws, `{"name": "twice", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"for": "1s"}}], "edges": [{"from": "t", "to": "w"}]}`)
	for range 2 {
		testenv.Go(t, scheduler.New(env.Store, commands.New(env.Store), env.Queries, scheduler.Config{Logger: quietLog(),
			WaitPoll: 20 * time.Millisecond}).Run)
	}
	var ids []string
	for range 20 {
		r, err := env.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r[0].RunID)
	}
	for _, id := range ids {
		testenv.Eventually(t, 30*time.Second, "run "+id+" to end", func() bool {
			st, err := env.Cmds.Workflows.Run(ctx, id)
			return err == nil && st.Status == run.StatusCompleted
		})
		events, err := env.Store.ReadStream(ctx, commands.RunStream(id), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		ends := 0
		for _, e := range events {
			var sc run.StageCompleted
			if e.Type == sc.EventType() && json.Unmarshal(e.Data, &sc) == nil && sc.Wait == run.WaitEndedTime {
				ends++
			}
		}
		if ends != 1 {
			t.Fatalf("run %s: the wait ended %d times in the log", id, ends)
		}
	}
}
