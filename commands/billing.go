package commands

import (
	"context"
	"errors"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
)

var billingAgg = aggregate[billing.State]{evolve: billing.State.Evolve, sharesEvents: true}

// BillingStream is the billing account stream of a workspace.
func BillingStream(workspaceID string) string {
	return eventstore.StreamName(billing.Category, workspaceID)
}

// TopUp adds paid credit to a workspace. A non-empty reference makes the top-up idempotent.
func (h *Billing) TopUp(ctx context.Context, workspaceID string, amount billing.Credits, reference string) (Result, error) {
	if _, err := h.workspaces.Workspace(ctx, workspaceID); err != nil {
		return Result{}, err
	}
	res, err := execute(ctx, h, BillingStream(workspaceID), billingAgg, func(s billing.State) ([]domain.Event, error) {
		return billing.DecideTopUp(s, workspaceID, amount, reference, h.now())
	})
	if errors.Is(err, eventstore.ErrIdempotencyConflict) {
		return Result{Stream: BillingStream(workspaceID)}, nil // this reference was already credited
	}
	return res, wrap("top up", err)
}

// RenewPlan starts a new plan period with included credits.
func (h *Billing) RenewPlan(ctx context.Context, workspaceID string, included billing.Credits) (Result, error) {
	if _, err := h.workspaces.Workspace(ctx, workspaceID); err != nil {
		return Result{}, err
	}
	res, err := execute(ctx, h, BillingStream(workspaceID), billingAgg, func(s billing.State) ([]domain.Event, error) {
		return billing.DecideRenew(s, workspaceID, included, h.now())
	})
	return res, wrap("renew plan", err)
}

// Charge bills amount to the workspace for cause, once: a cause charged before is absorbed by
// the idempotent append of its derived event id, wherever in the stream that charge landed.
func (h *Billing) Charge(ctx context.Context, workspaceID, cause string, amount billing.Credits) (Result, error) {
	res, err := execute(ctx, h, BillingStream(workspaceID), billingAgg, func(s billing.State) ([]domain.Event, error) {
		return billing.DecideCharge(s, workspaceID, cause, amount, h.now())
	})
	if errors.Is(err, eventstore.ErrIdempotencyConflict) {
		return Result{Stream: BillingStream(workspaceID)}, nil
	}
	return res, wrap("charge", err)
}

// Balance folds the workspace's billing account from the event store.
func (h *Billing) Balance(ctx context.Context, workspaceID string) (billing.State, error) {
	b, err := load(ctx, h, BillingStream(workspaceID), billingAgg)
	if err != nil {
		return billing.State{}, err
	}
	b.state.WorkspaceID = workspaceID
	return b.state, nil
}

// ChargeRequest is one charge of a batch: amount billed for cause.
type ChargeRequest struct {
	Cause  string
	Amount billing.Credits
}

// ChargeMany bills several causes of one workspace in one append, so that many executions
// finishing at once do not each contend for the billing stream's next revision. The result
// holds, per request, nil (charged, now or before) or ErrInsufficientCredits.
func (h *Billing) ChargeMany(ctx context.Context, workspaceID string, reqs []ChargeRequest) ([]error, error) {
	results := make([]error, len(reqs))
	_, err := execute(ctx, h, BillingStream(workspaceID), billingAgg, func(s billing.State) ([]domain.Event, error) {
		var events []domain.Event
		for i, r := range reqs {
			evs, err := billing.DecideCharge(s, workspaceID, r.Cause, r.Amount, h.now())
			results[i] = err
			for _, e := range evs {
				s = s.Evolve(e)
				events = append(events, e)
			}
		}
		return events, nil
	})
	if errors.Is(err, eventstore.ErrIdempotencyConflict) {
		// Some cause was charged before (a worker died after charging): charge one by one,
		// which absorbs the repeats.
		for i, r := range reqs {
			_, err := h.Charge(ctx, workspaceID, r.Cause, r.Amount)
			if err != nil && !errors.Is(err, domain.ErrInsufficientCredits) {
				return nil, err
			}
			results[i] = err
		}
		return results, nil
	}
	return results, wrap("charge", err)
}
