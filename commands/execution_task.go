package commands

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
)

// LeaseTask leases the next attempt of a worker-transport execution to worker until now plus
// lease (execution.DecideLease), failing an expired lease first. The append expects the
// revision read, so two workers (or instances) cannot both lease an attempt. It returns the
// state after; the attempt is leased to worker only when after.HoldsTask(after.Attempt) and
// after.Worker is worker (an expiry that ended the execution leases nothing).
// execution.ErrNotClaimable: nothing to lease.
func (h *Attempts) LeaseTask(ctx context.Context, id, worker string, lease time.Duration) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideLease(s, worker, lease, h.now())
	})
}

// ExtendTask renews the lease of the execution's attempt (a worker's heartbeat).
// execution.ErrTaskNotHeld: the attempt's lease is no longer held.
func (h *Attempts) ExtendTask(ctx context.Context, id string, attempt int, lease time.Duration) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideExtend(s, attempt, lease, h.now())
	})
}

// ExpireTask fails the leased attempt whose lease ran out (code lease_expired).
// execution.ErrNotClaimable: the lease is held still, or the attempt ended.
func (h *Attempts) ExpireTask(ctx context.Context, id string) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideExpire(s, h.now())
	})
}
