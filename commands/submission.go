package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	// window is the cache window's stream ("" when windows are off), read as this process
	// knew it (a guess the opening append checks; known tells it was read from the store);
	// leader is the execution whose output a free call reuses ("" when the call is billed).
	window string
	read   loaded[execution.CacheWindow]
	known  bool
	leader string
	// done is the leader of a free call when it has completed: the call is then recorded
	// complete at once (recordFree).
	done execution.State
	// runner is this process's runner, nil when none runs here; tried is the submitted state
	// of a call it ran first and gave up on.
	runner Runner
	tried  execution.State
	// hand is a worker's poll waiting in this process, reserved for the call (handOff).
	hand PollHandoff
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
	return &submission{h: h, c: c, sub: sub, start: start, id: newID().String(), runner: h.localRunner()}, nil
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

// findCacheWindow finds the call's cache window as this process knows it, reading nothing: an
// open one makes the call free, reusing its leader's output. One not known is opened later
// by an append that expects it where it was found (openCacheWindow, or the run-first commit).
func (s *submission) findCacheWindow(context.Context) error {
	var err error
	s.window, s.read, s.leader, err = s.h.cacheWindow(s.c)
	s.sub.CachedFrom = s.leader
	return err
}

// readCacheWindow reads the window from the store, when it was only a guess.
func (s *submission) readCacheWindow(ctx context.Context) error {
	if s.window == "" || s.known {
		return nil
	}
	var err error
	s.read, s.leader, err = s.h.readCacheWindow(ctx, s.window)
	s.known, s.sub.CachedFrom = err == nil, s.leader
	return err
}

// checkBalance refuses a billed call the workspace's spendable balance cannot cover (the
// advisory check: the charge decides). A call refused on a window it did not read reads it
// first: another process, or this one before a restart, may have opened it, and the call is
// then free.
func (s *submission) checkBalance(ctx context.Context) error {
	if s.leader != "" {
		return nil
	}
	err := s.h.checkBalance(ctx, s.c.WorkspaceID, s.sub.CostMilli)
	if err == nil || s.window == "" || s.known {
		return err
	}
	if rerr := s.readCacheWindow(ctx); rerr != nil || s.leader == "" {
		return errors.Join(err, rerr)
	}
	return nil
}

// findLeaderOutput finds, for a free call, whether its leader has completed: the call is then
// recorded complete with the leader's output in one commit (recordFree), which takes its
// signature too. A leader still running, or failed, leaves the call to the usual path, where the
// executor waits for it (or runs the call as one of its own).
func (s *submission) findLeaderOutput(ctx context.Context) error {
	if s.leader == "" || s.runner == nil || s.c.IdempotencyKey != "" || !s.h.takesClaims() {
		return nil
	}
	var err error
	s.done, err = s.h.completedExecution(ctx, s.leader)
	return err
}

// runsFirst reports whether the call is handed to the runner before anything of it is written,
// its signature then taken in that run's commit.
func (s *submission) runsFirst() bool {
	return s.runner != nil && s.h.runsFirst(s.c, s.sub) && s.h.takesClaims()
}

// takeSignature takes the request's signature before the first append, unless the call runs
// first, whose commit takes it.
func (s *submission) takeSignature(ctx context.Context) error {
	if s.runsFirst() || s.done.Exists || s.handOff() || s.claimInSubmit() {
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

// recordFree records a free call whose leader has completed (recorded true): its submit and its
// completion with the leader's output, free, in one commit with its signature.
func (s *submission) recordFree(ctx context.Context) (execution.State, bool, error) {
	if !s.done.Exists {
		return execution.State{}, false, nil
	}
	s.sub.ExecutionID, s.sub.Runner = s.id, s.runner.Worker()
	submitted, ended, err := s.h.recordFree(ctx, s.sub, s.done, s.c.Claim)
	if err != nil {
		return execution.State{}, false, err
	}
	if s.c.WaitFor <= 0 {
		return submitted, true, nil // SPEC.md 4.1: without waitForMs, the submitted state
	}
	return ended, true, nil
}

// recordFreeAfterAll records a call that ran first and was left out of its commit because
// another call had opened its window (a window this process guessed was not open) as a free
// call of that window's leader, when the leader has completed: one commit, where appending its
// submit for the executor to follow the leader took two.
func (s *submission) recordFreeAfterAll(ctx context.Context) (execution.State, bool, error) {
	if !s.tried.Exists || s.leader == "" {
		return execution.State{}, false, nil
	}
	if err := s.findLeaderOutput(ctx); err != nil {
		return execution.State{}, false, err
	}
	return s.recordFree(ctx)
}

// runFirst hands a repeatable call to the runner before its submit is appended (recorded
// true: submit, outcome, charge and the opening of its cache window are written). When the
// runner gives up on it, the signature is taken now, for the usual path.
func (s *submission) runFirst(ctx context.Context) (execution.State, bool, error) {
	s.sub.ExecutionID = s.id
	if s.runner == nil {
		return execution.State{}, false, nil
	}
	s.sub.Runner = s.runner.Worker()
	var open *WindowOpening
	if s.window != "" && s.leader == "" {
		open = s.h.windowOpening(s.window, s.read, s.id, s.c.CacheWindow)
	}
	st, ok := s.h.runFirst(ctx, s.runner, s.c, s.sub, open)
	if ok {
		return st, true, nil
	}
	if s.hand != nil || !s.runsFirst() {
		// Not run first: its submit's commit takes the signature (handed off, or
		// claimInSubmit), or it was taken before the first append (takeSignature).
		return execution.State{}, false, nil
	}
	// The run may still be recorded, its commit taking the signature under this request's
	// owner; taking it here first refuses that commit instead.
	if err := s.c.Claim.Settle(ctx); err != nil {
		return execution.State{}, false, fmt.Errorf("submit execution: %w", err)
	}
	s.tried = st
	return execution.State{}, false, nil
}

// openCacheWindow opens the call's window with this execution as its leader, unless another
// submit opened it meanwhile, whose leader the call then reuses.
func (s *submission) openCacheWindow(ctx context.Context) error {
	if s.window == "" || s.leader != "" {
		return nil
	}
	read := &s.read
	if s.tried.Exists {
		// The run-first commit left the call out, perhaps because another call opened the
		// window meanwhile: the window as found is stale, and is read before it is opened.
		read = nil
	}
	var err error
	s.leader, err = s.h.openCacheWindow(ctx, s.window, read, s.id, s.c.CacheWindow)
	s.sub.CachedFrom = s.leader
	return err
}

// claimInSubmit reports whether the submit's own commit takes the request's signature, as a
// handed-off or run-first call's does: the submit is then the call's first and only append
// (no idempotency key to bind, no cache window, not run first, no free record), on a store
// whose commits take claims. It saves the replay guard's round trip of its own, and the
// commit can be shared with other appends (group commit).
func (s *submission) claimInSubmit() bool {
	return s.c.Claim != nil && s.c.IdempotencyKey == "" && s.window == "" && !s.done.Exists && !s.runsFirst() && s.h.takesClaims()
}

// handOff reserves, for a worker module's call, a worker's poll waiting in this process for
// the module (TaskHandoffs), and reports whether it did: the submit then leases the call's
// first attempt to that worker in its own commit, which takes the request's signature too,
// and hands the task to the poll. A call bound to an idempotency key or in a cache window
// takes the usual path: its first append is elsewhere.
func (s *submission) handOff() bool {
	hr, ok := s.runner.(TaskHandoffs)
	if !ok || s.sub.Transport == nil || s.sub.Transport.Type != execution.TransportWorker || s.c.IdempotencyKey != "" ||
		s.window != "" || s.sub.CachedFrom != "" || !s.h.takesClaims() {
		return false
	}
	s.hand, _ = hr.ReservePoll(s.sub)
	return s.hand != nil
}

// releaseHandoff gives back a reserved poll the call did not lease to (it stopped early).
func (s *submission) releaseHandoff() {
	if s.hand != nil {
		s.hand.Release()
		s.hand = nil
	}
}

// appendSubmit appends the submit and hands the execution to this process's runner, waiting
// for it up to the call's wait. A call with a poll reserved (handOff) is leased to the poll's
// worker in the submit's commit and handed to the poll: one commit from the submit to the
// worker holding the task.
func (s *submission) appendSubmit(ctx context.Context) (execution.State, error) {
	if hand := s.hand; hand != nil {
		s.hand = nil
		submitted, leased, err := appendLeasedSubmit(ctx, s.h, s.sub, hand, s.c.Claim)
		if err != nil {
			hand.Release()
			return execution.State{}, err
		}
		done := s.runner.Take(leased)
		hand.Deliver(leased)
		// SPEC.md 4.1: a call not ended within its wait is answered as submitted.
		return awaitLocal(ctx, submitted, done, s.c.WaitFor-time.Since(s.start)), nil
	}
	if s.claimInSubmit() {
		st, err := appendClaimedSubmit(ctx, s.h, s.sub, s.c.Claim)
		if err != nil || s.runner == nil {
			return st, err
		}
		return awaitLocal(ctx, st, s.runner.Take(st), s.c.WaitFor-time.Since(s.start)), nil
	}
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
