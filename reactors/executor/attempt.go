package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/modules"
)

// attempt runs the claimed attempt of st and records its outcome.
func (e *Executor) attempt(ctx context.Context, st execution.State) (execution.State, error) {
	out, err := e.runModule(ctx, st, st.Attempt, false)
	if err != nil {
		f, ok := modules.AsFailure(err)
		if !ok {
			if ctx.Err() != nil {
				return st, fmt.Errorf("run abandoned: %w", err) // shutdown: the lease hands it on
			}
			e.log.WithField("executionId", st.ID).WithError(err).Error("module infrastructure error")
			f = &modules.Failure{Code: "internal_error", Message: "the module could not run; the attempt may be retried"}
		}
		return e.fail(ctx, st, f, retryable(err))
	}
	return e.complete(ctx, st, out, billing.Credits(st.CostMilli))
}

// complete charges usage (once per execution, whatever retries or takeovers happen) and
// records the output, in one commit when it can.
func (e *Executor) complete(ctx context.Context, st execution.State, out json.RawMessage, usage billing.Credits) (execution.State, error) {
	return e.completeWith(ctx, st, out, usage, commands.ChargedFinish{})
}

// completeWith is complete whose charge batch item starts as item (its Claim, Combined).
func (e *Executor) completeWith(ctx context.Context, st execution.State, out json.RawMessage, usage billing.Credits, item commands.ChargedFinish) (execution.State, error) {
	// st.Worker holds the attempt: this executor, or the worker that leased the task.
	done := commands.Outcome{Worker: st.Worker, Attempt: st.Attempt, Output: out, Usage: usage}
	item.Outcome = done
	charged, after, err := e.settle(ctx, st, usage, item)
	switch {
	case unstorable(err):
		return e.fail(ctx, st, outputUnstorable("output", err), true)
	case err != nil:
		return st, err
	case after.Exists:
		return after, nil
	case !charged:
		return e.fail(ctx, st, insufficientCredits(usage), false)
	}
	completed, err := e.cmds.Attempts.CompleteExecution(ctx, st.ID, st.Worker, st.Attempt, out, usage)
	if unstorable(err) {
		return e.fail(ctx, st, outputUnstorable("output", err), true)
	}
	return completed, err
}

// settle bills the execution's usage and, in the same commit, records item's outcome (after
// then exists). When the outcome could not go with the charge, after is the
// zero state and charged tells whether the charge is made: the caller records the outcome,
// or the failure to pay for it. A charge made by an earlier holder that died before recording
// the output is found in the billing history rather than refused for the balance it took.
func (e *Executor) settle(ctx context.Context, st execution.State, usage billing.Credits, item commands.ChargedFinish) (charged bool, after execution.State, err error) {
	if usage <= 0 {
		return true, execution.State{}, nil
	}
	cause := "execution-" + st.ID
	item.ExecutionID, item.Charge = st.ID, commands.ChargeRequest{Cause: cause, Amount: usage}
	res, err := e.charges.charge(ctx, st.WorkspaceID, item)
	switch {
	case err != nil:
		return false, execution.State{}, err
	case res.Recorded:
		return true, res.State, nil
	case res.Err == nil:
		return true, execution.State{}, nil
	case !errors.Is(res.Err, domain.ErrInsufficientCredits):
		return false, execution.State{}, res.Err
	}
	charged, err = e.queries.HasCharge(ctx, st.WorkspaceID, cause)
	return charged, execution.State{}, err
}

func (e *Executor) fail(ctx context.Context, st execution.State, f *modules.Failure, retry bool) (execution.State, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return st, fmt.Errorf("encode failure: %w", err)
	}
	return e.cmds.Attempts.FailExecution(ctx, st.ID, st.Worker, st.Attempt, body, retry, e.backoff(st.Attempt))
}

// follow completes a cached repeat with its first call's output, for free, once that call
// has finished. It reports false when the first call failed or cannot be found: the repeat
// then runs and bills as a call of its own.
func (e *Executor) follow(ctx, runCtx context.Context, st execution.State) (execution.State, bool) {
	leader, err := e.awaitEnd(ctx, st.CachedFrom)
	if err != nil {
		return st, true // ctx ended or the store failed: the lease hands the repeat on
	}
	if leader.Status != execution.StatusCompleted {
		return st, false
	}
	done, err := e.cmds.Attempts.CompleteExecution(runCtx, st.ID, e.opts.Worker, st.Attempt, leader.Output, 0)
	if err != nil {
		if !errors.Is(err, execution.ErrLeaseLost) {
			e.log.WithField("executionId", st.ID).WithError(err).Error("cannot record cached output")
		}
		return st, true
	}
	return done, true
}

// awaitEnd waits until execution id has ended and returns it (zero when it does not exist).
func (e *Executor) awaitEnd(ctx context.Context, id string) (execution.State, error) {
	var st execution.State
	err := e.hub.Until(ctx, commands.ExecutionStream(id), time.Second, func() (bool, error) {
		var err error
		st, err = e.cmds.Attempts.Execution(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			return true, nil
		}
		return err == nil && st.Status.Terminal(), err
	})
	return st, err
}

// runUnclaimed runs a repeatable module's next attempt before claiming it, then records claim
// and outcome in one append (commands.ClaimAndFinish). A cached repeat, or an execution that
// is not claimable as read, takes the claim path instead.
func (e *Executor) runUnclaimed(ctx, runCtx context.Context, w work) (execution.State, error) {
	id, st := w.id, w.state
	if !st.Exists {
		var err error
		if st, err = e.cmds.Attempts.Execution(ctx, id); err != nil {
			return st, err
		}
	}
	if st.CachedFrom != "" || !st.Claimable(e.opts.Now()) {
		return e.claim(ctx, id)
	}
	out, runErr := e.runModule(runCtx, st, st.NextAttempt(), false)
	var outcome commands.Outcome
	var err error
	switch f, ok := modules.AsFailure(runErr); {
	case runErr == nil:
		var after execution.State
		if outcome, after, err = e.completion(ctx, st, out); err != nil || after.Exists {
			return after, err
		}
	case ok:
		outcome, err = e.failure(f, true)
	case runCtx.Err() != nil:
		return st, fmt.Errorf("run abandoned: %w", runErr) // shutdown: unclaimed, a sweep finds it
	default:
		e.log.WithField("executionId", st.ID).WithError(runErr).Error("module infrastructure error")
		outcome, err = e.failure(&modules.Failure{Code: "internal_error", Message: "the module could not run; the attempt may be retried"}, true)
	}
	if err != nil {
		return st, err
	}
	e.metrics.claims.Inc()
	after, err := e.cmds.Attempts.ClaimAndFinish(runCtx, id, e.lease(st), outcome)
	if unstorable(err) && runErr == nil {
		failed, ferr := e.failure(outputUnstorable("output", err), true)
		if ferr != nil {
			return st, ferr
		}
		return e.cmds.Attempts.ClaimAndFinish(runCtx, id, e.lease(st), failed)
	}
	return after, err
}

// completion charges the unclaimed call (once per execution) with its claim and completion
// in one commit, and returns the state after it. When they could not go together it returns
// the outcome to record with the claim instead: the completion, or a final failure when the
// balance cannot cover the call.
func (e *Executor) completion(ctx context.Context, st execution.State, out json.RawMessage) (commands.Outcome, execution.State, error) {
	usage := billing.Credits(st.CostMilli)
	complete := commands.Outcome{Worker: e.opts.Worker, Output: out, Usage: usage}
	charged, after, err := e.settle(ctx, st, usage, commands.ChargedFinish{Outcome: complete, ClaimFor: e.lease(st)})
	switch {
	case unstorable(err):
		failed, ferr := e.failure(outputUnstorable("output", err), true)
		return failed, execution.State{}, ferr
	case err != nil:
		return commands.Outcome{}, st, err
	case after.Exists:
		e.metrics.claims.Inc()
		return commands.Outcome{}, after, nil
	case !charged:
		failed, err := e.failure(insufficientCredits(usage), false)
		return failed, execution.State{}, err
	}
	return complete, execution.State{}, nil
}

// failure is the outcome of the claimed attempt failing with f, retried while attempts remain
// and retry is true.
func (e *Executor) failure(f *modules.Failure, retry bool) (commands.Outcome, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return commands.Outcome{}, fmt.Errorf("encode failure: %w", err)
	}
	return commands.Outcome{Worker: e.opts.Worker, Failure: body, Retry: retry, Backoff: e.backoff}, nil
}

func insufficientCredits(usage billing.Credits) *modules.Failure {
	return &modules.Failure{Code: "insufficient_credits", Message: fmt.Sprintf("the workspace balance cannot cover the %s credits this call costs", usage)}
}
