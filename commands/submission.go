package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
)

// submission is one submit under way (SubmitExecution): the command, its domain form, and what
// its steps have found so far. The steps run in the order they are written here; all the
// checks come before the first append.
type submission struct {
	h     *Executions
	c     SubmitExecution
	sub   execution.Submit
	start time.Time
	// id is the execution's id: a fresh one, or the one an earlier submit bound the key to.
	id string
	// window is the cache window's stream ("" when windows are off), read as it was read;
	// leader is the execution whose output a free call reuses ("" when the call is billed).
	window string
	read   loaded[execution.CacheWindow]
	leader string
	// runner is this process's runner, nil when none runs here; tried is the submitted state
	// of a call it ran first and gave up on.
	runner Runner
	tried  execution.State
}

// newSubmission checks and prices the call (prepareSubmit), reading the workspace's module
// when it names one.
func (h *Executions) newSubmission(ctx context.Context, c SubmitExecution) (*submission, error) {
	start := time.Now()
	sub, use, err := h.prepareSubmit(ctx, c)
	if err != nil {
		return nil, err
	}
	if !use.cacheable {
		// A workspace module's code may have side effects: an identical call runs again,
		// unless the module says it may be served from the cache window.
		c.CacheWindow = 0
	}
	return &submission{h: h, c: c, sub: sub, start: start, id: uuid.NewString(), runner: h.localRunner()}, nil
}

// earlierExecution is the idempotency key's read: the execution an earlier submit with the key
// and body created, found true. When that submit bound the key but stopped before creating its
// execution, this one creates it under the bound id.
func (s *submission) earlierExecution(ctx context.Context) (execution.State, bool, error) {
	if s.c.IdempotencyKey == "" {
		return execution.State{}, false, nil
	}
	bound, err := s.h.boundExecution(ctx, s.c, s.id)
	if err != nil || bound == "" {
		return execution.State{}, false, err
	}
	prev, err := s.h.Execution(ctx, bound)
	if !errors.Is(err, domain.ErrNotFound) {
		return prev, true, err
	}
	s.id = bound // the first request stopped before creating it: create it now
	return execution.State{}, false, nil
}

// findCacheWindow reads the call's cache window: an open one makes the call free, reusing its
// leader's output.
func (s *submission) findCacheWindow(ctx context.Context) error {
	var err error
	s.window, s.read, s.leader, err = s.h.cacheWindow(ctx, s.c)
	return err
}

// checkBalance refuses a billed call the workspace's spendable balance cannot cover (the
// advisory check: the charge decides).
func (s *submission) checkBalance(ctx context.Context) error {
	if s.leader != "" {
		return nil
	}
	return s.h.checkBalance(ctx, s.c.WorkspaceID, s.sub.CostMilli)
}

// runsFirst reports whether the call is handed to the runner before anything of it is written,
// its signature then taken in that run's commit.
func (s *submission) runsFirst() bool {
	return s.runner != nil && s.h.runsFirst(s.c, s.sub, s.window) && s.h.takesClaims()
}

// takeSignature takes the request's signature before the first append, unless the call runs
// first, whose commit takes it.
func (s *submission) takeSignature(ctx context.Context) error {
	if s.runsFirst() {
		return nil
	}
	if err := s.c.Claim.Settle(ctx); err != nil {
		return fmt.Errorf("submit execution: %w", err)
	}
	return nil
}

// bindIdempotencyKey binds the key to the execution, or finds the execution a concurrent
// submit bound it to first (found true).
func (s *submission) bindIdempotencyKey(ctx context.Context) (execution.State, bool, error) {
	if s.c.IdempotencyKey == "" {
		return execution.State{}, false, nil
	}
	bound, err := s.h.bindIdempotencyKey(ctx, s.c, s.id)
	if err != nil {
		return execution.State{}, false, err
	}
	if bound != s.id { // a concurrent submit with the key bound it first
		if prev, err := s.h.Execution(ctx, bound); err == nil {
			return prev, true, nil
		}
		s.id = bound
	}
	return execution.State{}, false, nil
}

// openCacheWindow opens the call's window with this execution as its leader, unless another
// submit opened it meanwhile, whose leader the call then reuses.
func (s *submission) openCacheWindow(ctx context.Context) error {
	if s.window == "" || s.leader != "" {
		return nil
	}
	var err error
	s.leader, err = s.h.openCacheWindow(ctx, s.window, s.read, s.id, s.c.CacheWindow)
	return err
}

// runFirst hands a repeatable call to the runner before its submit is appended (recorded
// true: submit, outcome and charge are written). When the runner gives up on it, the
// signature is taken now, for the usual path.
func (s *submission) runFirst(ctx context.Context) (execution.State, bool, error) {
	s.sub.ExecutionID, s.sub.CachedFrom = s.id, s.leader
	if s.runner == nil {
		return execution.State{}, false, nil
	}
	s.sub.Runner = s.runner.Worker()
	st, ok := s.h.runFirst(ctx, s.runner, s.c, s.sub, s.window)
	if ok {
		return st, true, nil
	}
	// The run may still be recorded, its commit taking the signature under this request's
	// owner; taking it here first refuses that commit instead.
	if err := s.c.Claim.Settle(ctx); err != nil {
		return execution.State{}, false, fmt.Errorf("submit execution: %w", err)
	}
	s.tried = st
	return execution.State{}, false, nil
}

// appendSubmit appends the submit and hands the execution to this process's runner, waiting
// for it up to the call's wait.
func (s *submission) appendSubmit(ctx context.Context) (execution.State, error) {
	st, created, err := s.h.appendSubmit(ctx, s.sub)
	if err == nil && !created && s.c.WaitFor <= 0 && s.tried.Exists {
		// The run this call gave up on was recorded after all, just before this append: a
		// call without waitForMs still answers with its submitted state (SPEC.md 4.1).
		return s.tried, nil
	}
	if err != nil || s.runner == nil || !created {
		return st, err
	}
	return awaitLocal(ctx, st, s.runner.Take(st), s.c.WaitFor-time.Since(s.start)), nil
}
