package executor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/testenv"
)

// windowCall is an identical call of core.echo with a cache window; with wait it is run first.
func windowCall(ws string, wait time.Duration) commands.SubmitExecution {
	return commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo", Input: json.RawMessage(`{"same":"call"}`),
		Config: json.RawMessage(`{}`), Attempts: 1, CacheWindow: time.Minute, WaitFor: wait}
}

// Identical calls sent to two instances at once, each running them first and opening the
// window in the commit that records the run: exactly one is billed, every other is free and
// answers the first call's output, and the account is charged once.
func TestIdenticalCallsOnTwoInstancesBillOnce(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	reg := registry(t)
	a, _ := startInstance(t, env, reg, executor.Config{Worker: "a", Concurrency: 16})
	b, _ := startInstance(t, env, reg, executor.Config{Worker: "b", Concurrency: 16})
	instances := []*commands.Commands{a, b}
	const n = 24
	ids := make(chan string, n)
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			wait := time.Duration(0)
			if i%3 != 0 { // most wait, and so run first; the others do not wait
				wait = 10 * time.Second
			}
			st, err := instances[i%2].Executions.SubmitExecution(context.Background(), windowCall(ws, wait))
			ids <- st.ID
			errs <- err
		}()
	}
	close(start)
	var ended []execution.State
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		ended = append(ended, waitTerminal(t, a, <-ids))
	}
	var leader execution.State
	for _, st := range ended {
		if st.CachedFrom == "" {
			if leader.Exists {
				t.Fatalf("executions %s and %s both billed", leader.ID, st.ID)
			}
			leader = st
		}
	}
	if !leader.Exists || leader.Status != execution.StatusCompleted || leader.TotalUsage != billing.FromWhole(1) {
		t.Fatalf("no billed, completed leader: %+v", leader.Record())
	}
	for _, st := range ended {
		if st.ID == leader.ID {
			continue
		}
		if st.CachedFrom != leader.ID || st.TotalUsage != 0 || st.Status != execution.StatusCompleted || !jsonEqual(st.Output, string(leader.Output)) {
			t.Fatalf("repeat %s: cachedFrom %s usage %v status %s output %s; want free from %s with %s",
				st.ID, st.CachedFrom, st.TotalUsage, st.Status, st.Output, leader.ID, leader.Output)
		}
	}
	if bal, err := a.Billing.Balance(context.Background(), ws); err != nil || bal.Total() != billing.FromWhole(99) {
		t.Fatalf("balance after %d identical calls = %v (%v), want 99", n, bal.Total(), err)
	}
}

// A process that never saw a window (another instance opened it, or this one before a
// restart) finds it all the same: the identical call is free, even with a balance that
// could not pay for it.
func TestCacheWindowHoldsForAFreshProcess(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 1)
	reg := registry(t)
	before, stop := startInstance(t, env, reg, executor.Config{Worker: "before", Concurrency: 4})
	first, err := before.Executions.SubmitExecution(context.Background(), windowCall(ws, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	first = waitTerminal(t, before, first.ID)
	stop()
	after, _ := startInstance(t, env, reg, executor.Config{Worker: "after", Concurrency: 4})
	again, err := after.Executions.SubmitExecution(context.Background(), windowCall(ws, 10*time.Second))
	if err != nil {
		t.Fatalf("identical call in the window on a fresh process: %v", err)
	}
	again = waitTerminal(t, after, again.ID)
	if first.TotalUsage != billing.FromWhole(1) || again.CachedFrom != first.ID || again.TotalUsage != 0 || !jsonEqual(again.Output, string(first.Output)) {
		t.Fatalf("first usage %v; again from %q usage %v output %s, want free from %s with %s",
			first.TotalUsage, again.CachedFrom, again.TotalUsage, again.Output, first.ID, first.Output)
	}
}

// A repeat of a call that has completed is recorded complete at once, in one commit, with the first call's
// output and no usage; without waitForMs it still answers with its submitted state (SPEC.md 4.1).
func TestRepeatOfACompletedCallIsRecordedFree(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	cmds, _ := startInstance(t, env, registry(t), executor.Config{Worker: "a", Concurrency: 4})
	first, err := cmds.Executions.SubmitExecution(context.Background(), windowCall(ws, 10*time.Second))
	if err != nil || first.Status != execution.StatusCompleted {
		t.Fatalf("first call: %s, %v", first.Status, err)
	}
	waited, err := cmds.Executions.SubmitExecution(context.Background(), windowCall(ws, 10*time.Second))
	if err != nil || waited.Status != execution.StatusCompleted || waited.CachedFrom != first.ID || waited.TotalUsage != 0 ||
		!jsonEqual(waited.Output, string(first.Output)) {
		t.Fatalf("waiting repeat: %+v, %v", waited.Record(), err)
	}
	// One commit: the submit and the completion, no claim of an attempt between them.
	if events, err := env.Store.ReadStream(context.Background(), commands.ExecutionStream(waited.ID), 0, 10); err != nil || len(events) != 2 {
		t.Fatalf("the repeat's stream holds %d events (%v), want its submit and completion", len(events), err)
	}
	quick, err := cmds.Executions.SubmitExecution(context.Background(), windowCall(ws, 0))
	if err != nil || quick.Status != execution.StatusCreated || quick.CachedFrom != first.ID || quick.TotalUsage != 0 {
		t.Fatalf("repeat without waitForMs: %+v, %v", quick.Record(), err)
	}
	if done := waitTerminal(t, cmds, quick.ID); done.Status != execution.StatusCompleted || done.TotalUsage != 0 || !jsonEqual(done.Output, string(first.Output)) {
		t.Fatalf("repeat without waitForMs ended %+v", done.Record())
	}
	if bal, err := cmds.Billing.Balance(context.Background(), ws); err != nil || bal.Total() != billing.FromWhole(9) {
		t.Fatalf("balance after one billed call and two repeats = %v (%v), want 9", bal.Total(), err)
	}
}
