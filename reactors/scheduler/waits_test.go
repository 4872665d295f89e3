package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
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
