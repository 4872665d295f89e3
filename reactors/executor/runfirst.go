package executor

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
)

// RunFirst implements commands.Runner: a waiting call of a repeatable module runs in a slot of
// its workspace at once, before anything of it is written, and its submit, completion and
// charge go into the workspace's next charge batch: one commit, where the usual path takes
// one for the submit and one for the rest. A failed run, a balance that cannot cover the call,
// or a batch that cannot be written in one go answers false, and the caller takes the usual
// path, which runs the call again (harmless: the module is repeatable) and records whatever
// happens. So does a call not recorded within its wait: it must answer by then with an id.
func (e *Executor) RunFirst(ctx context.Context, run commands.FirstRun, wait time.Duration) (execution.State, bool) {
	return e.runFirstWithin(ctx, run, wait, func(ws string, job func()) bool {
		e.slots.submit(ws, job)
		return true
	})
}

// tryRunFirstBudget bounds how long TryRunFirst may hold a call that does not wait: about what
// its submit's own commit may take on a loaded database. A run not recorded by then is left
// to the usual path, as RunFirst's is when its wait ends.
const tryRunFirstBudget = time.Second

// tryRunFirstSlotWait bounds how long TryRunFirst waits for a slot, about a charge batch. A
// call refused at once whenever its workspace's slots were momentarily full went the usual
// path, whose queued runs hold slots to their commit, so more calls were refused: under load
// the service could fall into taking the two-commit path for a third of its calls.
const tryRunFirstSlotWait = 25 * time.Millisecond

// TryRunFirst implements commands.Runner: RunFirst for a call that does not wait, which runs in
// a slot that is free or frees within tryRunFirstSlotWait, and within tryRunFirstBudget.
func (e *Executor) TryRunFirst(ctx context.Context, run commands.FirstRun) (execution.State, bool) {
	return e.runFirstWithin(ctx, run, tryRunFirstBudget, func(ws string, job func()) bool {
		return e.slots.startWithin(ws, job, tryRunFirstSlotWait)
	})
}

// runFirstWithin runs the call in a slot that start gives it (start reports false when it
// gives none) and returns what was recorded, or false when nothing was within wait.
func (e *Executor) runFirstWithin(ctx context.Context, run commands.FirstRun, wait time.Duration,
	start func(workspace string, job func()) bool) (execution.State, bool) {
	st := run.State
	e.mu.Lock()
	runCtx := e.runCtx
	e.mu.Unlock()
	if runCtx == nil || !e.taking.Load() {
		return st, false
	}
	type result struct {
		st execution.State
		ok bool
	}
	done := make(chan result, 1)
	e.wg.Add(1)
	e.metrics.queued.Inc()
	job := func() {
		defer e.wg.Done()
		e.metrics.queued.Dec()
		out, ok := e.runModuleFirst(ctx, runCtx, st)
		if !ok {
			done <- result{st, false}
			return
		}
		items := e.chain(ctx, runCtx, commands.FinishedFirst(run, e.opts.Worker, out, commands.MetadataFrom(ctx)))
		// The slot bounds module runs, not waits: the call waits for its workspace's next
		// charge batch outside it, so calls waiting to be recorded do not keep others from
		// running (with the slot held to the commit, more concurrent callers than slots sent
		// the rest the two-commit way, and throughput fell as load rose). The job still
		// holds e.wg, so this Add never races a Wait that has reached zero.
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			after, ok := e.recordFirst(ctx, st, items)
			done <- result{after, ok}
		}()
	}
	if !start(st.WorkspaceID, job) {
		e.metrics.queued.Dec()
		e.wg.Done()
		return st, false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.st, r.ok
	case <-timer.C:
		// The call must answer within its wait, with an execution id that exists: the caller
		// appends the submit now. Should this run still be recorded first, the caller's
		// submit finds the execution there; otherwise this run's append, which expects no
		// stream, fails and the usual path records the call.
		return st, false
	case <-ctx.Done():
		return st, false
	}
}

// runModuleFirst runs the call's module; false when the caller is gone or the run failed.
func (e *Executor) runModuleFirst(ctx, runCtx context.Context, st execution.State) (json.RawMessage, bool) {
	if ctx.Err() != nil {
		return nil, false
	}
	// The submit validated the call in this process a moment ago (commands.SubmitExecution).
	out, err := e.runModule(runCtx, st, st.NextAttempt(), true)
	if err != nil {
		return nil, false
	}
	return out, true
}

// chainBudget bounds how long a chain may run stages after its first (chain): it holds its
// first stage's commit, and the caller's answer, until it ends.
const chainBudget = 20 * time.Millisecond

// chain runs, after head, the stages of head's run that follow it one by one as long as each
// is the only one its step dispatches and a repeatable built-in (commands.ChainNext), at most
// commands.MaxChain in all and within chainBudget, and returns head with their items: one
// commit writes them all. A link whose module fails ends the chain before it: that stage takes
// the usual path once the chain's commit dispatched it.
func (e *Executor) chain(ctx, runCtx context.Context, head commands.ChargedFinish) []commands.ChargedFinish {
	items := []commands.ChargedFinish{head}
	if head.Step == nil {
		return items
	}
	start := time.Now()
	for len(items) < commands.MaxChain && time.Since(start) < chainBudget {
		next, ok := e.cmds.ChainNext(ctx, items[len(items)-1])
		if !ok {
			break
		}
		out, ok := e.runModuleFirst(ctx, runCtx, next.State)
		if !ok {
			break
		}
		items = append(items, commands.FinishedFirst(next, e.opts.Worker, out, head.CreateMeta))
	}
	return items
}

// recordFirst writes the items (a call's submit, output and charge, with the signature claim
// of the request that made it, and the stages chained after it) in the workspace's next charge
// batch, and returns the first item's state recorded. The first item's StageStep then tells
// the run as the chain's last written step left it.
func (e *Executor) recordFirst(ctx context.Context, st execution.State, items []commands.ChargedFinish) (execution.State, bool) {
	head := items[0]
	results, err := e.charges.chargeAll(ctx, st.WorkspaceID, items)
	if err != nil || !results[0].Recorded {
		return st, false
	}
	for i := len(items) - 1; i > 0; i-- {
		if results[i].Recorded && items[i].Step.Written {
			head.Step.After, head.Step.Dispatched = items[i].Step.After, items[i].Step.Dispatched
			break
		}
	}
	for _, r := range results {
		if r.Recorded {
			e.metrics.claims.Inc()
		}
	}
	return results[0].State, true
}
