package commands

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/modules"
)

// Runner runs executions in this process: the executor, given to the submits' handler when
// the process is wired (WithRunner). A submit is then handed to it at once instead of coming
// back to it through the log: the submit records the runner's worker name, so other instances
// leave the execution alone (docs/executions.md, "Claims").
type Runner interface {
	// Running reports whether the runner takes executions now; while it does not (before it
	// starts, once it stops), submits go through the log for any instance to claim.
	Running() bool
	// Worker is the name the runner claims executions under.
	Worker() string
	// Take queues st to run here. The channel receives the state the runner last recorded
	// once it is done with the execution (ended, or handed on to a retry or another
	// instance); it is buffered, so nobody need read it.
	Take(st execution.State) <-chan execution.State
	// RunFirst runs a waiting call of a repeatable module at once, before anything of it is
	// written, and records its submit, outcome and charge in one commit. It returns the state
	// recorded, or false when it did not record the call within wait, for the caller to append
	// the submit and Take it as usual (should the run still be recorded later, its append
	// expects no stream and fails against that submit).
	RunFirst(ctx context.Context, run FirstRun, wait time.Duration) (execution.State, bool)
	// TryRunFirst is RunFirst for a call that does not wait: it runs the call only when it can
	// start within a few milliseconds, and gives up after a short bound of its own. The caller answers with the
	// submitted state either way, as a call without waitForMs is answered (SPEC.md 4.1).
	TryRunFirst(ctx context.Context, run FirstRun) (execution.State, bool)
}

// TaskHandoffs is a Runner whose workers' polls wait in this process: a submit of a worker
// module's call may lease the call's first attempt to a waiting poll's worker in the submit's
// own commit, and hand the task to that poll, instead of appending the submit and then the
// lease from the poll once woken.
type TaskHandoffs interface {
	// ReservePoll reserves a poll waiting for sub's module that may take sub's task now (of its
	// workspace, not limited to some workflows' runs, within the module's concurrency); false
	// when none does. The caller must Deliver or Release the reservation.
	ReservePoll(sub execution.Submit) (PollHandoff, bool)
}

// PollHandoff is a waiting poll reserved for one task (TaskHandoffs.ReservePoll).
type PollHandoff interface {
	// Worker is the poll's worker id, and Lease how long its lease lasts.
	Worker() string
	Lease() time.Duration
	// Deliver answers the poll with the task of st, leased to Worker, after the runner has
	// taken st (Runner.Take).
	Deliver(st execution.State)
	// Release gives the poll back to its wait: the submit was not recorded.
	Release()
}

// FirstRun is a call handed to the runner before anything of it is written (Runner.RunFirst).
type FirstRun struct {
	// State is the execution as its submit makes it; Create are the submit's events, which the
	// runner writes in one commit with the call's outcome and charge (ChargedFinish.Create).
	State  execution.State
	Create []domain.Event
	// Claim is the signature claim of the request that made the call (nil when none), taken
	// in that commit (ChargedFinish.Claim).
	Claim *RequestClaim
	// Window, when set, opens the call's cache window in that commit (ChargedFinish.Window).
	Window *WindowOpening
	// Step, when set, steps the call's run in that commit (ChargedFinish.Step).
	Step *StageStep
}

// firstRunOf is the call sub makes, submitted at now, for a runner to run first; false when
// the submit is refused.
func firstRunOf(sub execution.Submit, now time.Time) (FirstRun, bool) {
	events, err := execution.DecideSubmit(execution.State{}, sub, now)
	if err != nil {
		return FirstRun{}, false
	}
	var st execution.State
	for _, e := range events {
		st = st.Evolve(e)
	}
	return FirstRun{State: st, Create: events}, true
}

// StageFirstRun returns the execution of a dispatched module stage as a call for worker's
// runner to run before anything of it is written (Runner.TryRunFirst), as a submit of a
// repeatable module is: its submit, outcome and charge then take one commit, and the caller
// has the outcome at once instead of through the log. It reports false for a stage that must
// take the usual path (SubmitStage): a child run, a module that is not a repeatable built-in,
// or a free one. (On Commands: the handlers it would belong to are full.)
func (c *Commands) StageFirstRun(r *run.State, st run.Stage, worker string) (FirstRun, bool) {
	return stageFirstRun(c.Executions.core, r, st, worker)
}

// stageFirstRun is StageFirstRun on h's modules and clock.
func stageFirstRun(h *core, r *run.State, st run.Stage, worker string) (FirstRun, bool) {
	if st.ChildRunID != "" || st.ExecutionID == "" {
		return FirstRun{}, false
	}
	sub := stageSubmit(h.modules, r, st)
	if m, ok := h.modules.Get(sub.Module); !ok || !modules.IsRepeatable(m) || sub.CostMilli <= 0 {
		return FirstRun{}, false
	}
	sub.Runner = worker
	return firstRunOf(sub, h.now())
}

// stageSubmit is the submit of the execution of a dispatched module stage, priced by mods.
func stageSubmit(mods *modules.Registry, r *run.State, st run.Stage) execution.Submit {
	comp := r.Component(st)
	cost := int64(0)
	if m, ok := mods.Get(comp.Module); ok {
		cost = m.CostMilli()
	}
	return execution.Submit{ExecutionID: st.ExecutionID, WorkspaceID: r.WorkspaceID, APIKeyID: r.APIKeyID,
		Module: comp.Module, Input: r.StageInput(st), Config: comp.Config, Attempts: comp.Attempts, CostMilli: cost,
		RunID: r.ID, StageID: st.ID, Retry: comp.Retry, TimeoutMs: comp.TimeoutMs}
}

// WithRunner returns c whose submits hand their executions to r, this process's runner. The
// runner is built on c's Attempts and Charges (which share the state cache with its
// Executions), so it is given here, once both exist, rather than to New.
func WithRunner(c *Commands, r Runner) *Commands {
	wired := *withWorkflows(c, func(w *Workflows) { w.runner = r })
	wired.Executions = &Executions{core: c.core, executionStreams: c.Executions.executionStreams,
		balanceCheck: c.Executions.balanceCheck, catalog: c.Executions.catalog, runner: r}
	return &wired
}

func (h *Executions) localRunner() Runner {
	if h.runner != nil && h.runner.Running() {
		return h.runner
	}
	return nil
}

// awaitLocal waits up to d for the local runner to finish st, returning the state it
// recorded, or st when the wait ends first.
func awaitLocal(ctx context.Context, st execution.State, done <-chan execution.State, d time.Duration) execution.State {
	if done == nil || d <= 0 {
		return st
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case end := <-done:
		if end.Exists {
			return end
		}
	case <-t.C:
	case <-ctx.Done():
	}
	return st
}

// ClaimAndFinish records, in one append, the claim of the execution's next attempt by the
// outcome's worker, leased for lease, and the outcome itself. It is for modules whose runs are
// harmless to repeat (modules.Repeatable): they run before any claim, and should another
// worker claim the execution first, this append fails on revision and is decided again,
// finding it no longer claimable (execution.ErrNotClaimable); the output is then dropped.
func (h *Attempts) ClaimAndFinish(ctx context.Context, id string, lease time.Duration, o Outcome) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return claimThen(s, lease, o, h.now())
	})
}
