package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/testenv"
)

// giveUpRunner runs each stage first, without its run's step, and then, once the log has
// brought its outcome, reports that it gave up: the facts the scheduler held from the log
// meanwhile (they may be recorded by the runner's commit) are the run's only way on.
type giveUpRunner struct {
	*executor.Executor
	hub *livehub.Hub
}

func (r giveUpRunner) TryRunFirst(ctx context.Context, first commands.FirstRun) (execution.State, bool) {
	w := r.hub.Watch(commands.ExecutionStream(first.State.ID))
	defer w.Close()
	first.Step = nil
	if _, ok := r.Executor.TryRunFirst(ctx, first); ok {
		select {
		case <-w.C: // the log has the outcome: the scheduler's feed takes it about now
		case <-ctx.Done():
		}
	}
	return execution.State{}, false
}

// TestFactsHeldWhileTheRunnerRunsAreStepped: what the log brings about a stage execution while
// the runner has it is held (scheduler.takeFact), and stepped when the runner does not settle
// it. Without the sweep (an hour away here), a held fact lost would stall the runs.
func TestFactsHeldWhileTheRunnerRunsAreStepped(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category}}, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runner := giveUpRunner{Executor: startExecutor(t, env), hub: hub}
	s := scheduler.New(env.Store, commands.New(env.Store), env.Queries, scheduler.Config{Logger: quietLog(),
		SweepInterval: time.Hour, SweepGrace: time.Hour, Runner: runner,
		Lock: func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }})
	testenv.Go(t, s.Run)
	wf := create(t, env, ws, linearEcho)
	var ids []string
	for range 5 {
		ids = append(ids, triggerVia(t, env.Cmds, ws, wf))
	}
	checkRuns(t, env, ws, 100, ids)
}
