package scheduler_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

func parentOf(childID string) string {
	return fmt.Sprintf(`{"name": "parent", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "call", "module": "RUN_WORKFLOW", "config": {"workflowId": %q}}], "edges": [{"from": "t", "to": "call"}]}`, childID)
}

// A scheduler that died after dispatching a RUN_WORKFLOW stage, before starting its child: the
// next one starts the child on reconcile, and the parent completes with the child's output.
func TestDispatchedChildStageIsStartedOnReconcile(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	child := create(t, env, ws, `{"name": "child", "components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}]}`)
	id := trigger(t, env, ws, create(t, env, ws, parentOf(child.ID)), `{"k": 1}`)
	_, dispatched, err := triggerDispatched(context.Background(), env, id)
	if err != nil || len(dispatched) != 1 || dispatched[0].ChildRunID == "" {
		t.Fatalf("step: %v %v", dispatched, err)
	}
	env.CaughtUp(t, "runs")
	startExecutor(t, env)
	startScheduler(t, env)
	st := waitRun(t, env, id)
	if st.Status != run.StatusCompleted || !jsonEqual(st.Stages[1].Output, `{"a":{"k":1}}`) || !jsonEqual(st.Output(), `{"call":{"a":{"k":1}}}`) {
		t.Fatalf("run %+v", st.Detail())
	}
	if ch := waitRun(t, env, dispatched[0].ChildRunID); ch.ParentRunID != id || ch.Status != run.StatusCompleted {
		t.Fatalf("child %+v", ch.Detail())
	}
}

// A child that started after its parent was cancelled (the parent's end found no child to
// cancel) is cancelled by the scheduler.
func TestChildStartedAfterItsParentEndedIsCancelled(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	child := create(t, env, ws, `{"name": "slow", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "wait", "module": "core.delay", "config": {"ms": 10000}}], "edges": [{"from": "t", "to": "wait"}]}`)
	id := trigger(t, env, ws, create(t, env, ws, parentOf(child.ID)), `{}`)
	ctx := context.Background()
	st, dispatched, err := triggerDispatched(ctx, env, id)
	if err != nil || len(dispatched) != 1 {
		t.Fatalf("step: %v %v", dispatched, err)
	}
	if _, err := env.Cmds.Workflows.CancelRun(ctx, id, "stop"); err != nil {
		t.Fatal(err)
	}
	if err := commands.New(env.Store).Workflows.SubmitStage(ctx, &st, dispatched[0]); err != nil {
		t.Fatal(err)
	}
	env.CaughtUp(t, "runs")
	startExecutor(t, env)
	startScheduler(t, env)
	ch := waitRun(t, env, dispatched[0].ChildRunID)
	if ch.Status != run.StatusFailed || ch.CancelAt.IsZero() {
		t.Fatalf("orphaned child %+v", ch.Detail())
	}
}
