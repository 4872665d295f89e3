package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
)

// Charges across workspaces. A workspace's charges are decided on its account and written a
// batch at a time, and each batch was a commit of its own: with the calls spread over many
// workspaces, a batch held under two executions, and the database's fixed work per commit
// (the append lock, the claims, the check that every event was written) grew to three times
// that of one workspace for the same executions (docs/performance.md, "Many workspaces").
// ChargeAndFinishAcross writes the batches of several workspaces in one atomic append, each
// decided on its own account exactly as ChargeAndFinish decides it alone. Any refusal writes
// nothing, and every batch then goes alone the usual way, whose refusals, retries and turns
// are the ones ChargeAndFinish has always had: combining is a saving, never what a charge's
// correctness rests on.

// WorkspaceCharges is one workspace's charge batch for ChargeAndFinishAcross.
type WorkspaceCharges struct {
	WorkspaceID string
	Items       []ChargedFinish
}

// AcrossResult is the fate of one WorkspaceCharges: what ChargeAndFinish would return for it.
type AcrossResult struct {
	Results []FinishResult
	Err     error
}

// ChargeAndFinishAcross is ChargeAndFinish for several workspaces' batches in one commit when
// it can be. Within held (AwaitAccountTurns; nil for none) the accounts it holds are read on and
// the commit is the turn's; a workspace this process takes turns on that held does not cover
// goes alone, in a turn of its own, beside the others. The workspaces must be distinct. It ends
// held.
func (h *Charges) ChargeAndFinishAcross(ctx context.Context, held *AccountTurns, batches []WorkspaceCharges) []AcrossResult {
	defer held.End()
	out := make([]AcrossResult, len(batches))
	var alone []int
	var plans []acrossPlan
	for i, b := range batches {
		if (len(batches) == 1 && held == nil) || (h.Contended(b.WorkspaceID) && !held.Holds(b.WorkspaceID)) {
			alone = append(alone, i)
			continue
		}
		p, ok := h.planAcross(ctx, held, b)
		switch {
		case !ok:
			alone = append(alone, i)
		case p.plan.charges == 0:
			out[i].Results = p.plan.results // nothing to write, as ChargeAndFinish answers it
		default:
			p.at = i
			plans = append(plans, p)
		}
	}
	if err := h.writeAcross(ctx, held, batches, plans, out); err != nil {
		for _, p := range plans {
			if refusal(err) {
				alone = append(alone, p.at)
			} else {
				out[p.at].Err = err // as ChargeAndFinish answers a store's failure
			}
		}
	}
	h.chargeAlone(ctx, batches, alone, out)
	return out
}

// acrossPlan is one workspace's batch decided for a combined append.
type acrossPlan struct {
	at   int // the batch's index
	plan chargePlan
}

// planAcross decides b on the workspace's account: as held read it on, or as cached. ok is
// false when it cannot be decided without the separate path (an account that cannot be read,
// an event that cannot be encoded), which then decides it.
func (h *Charges) planAcross(ctx context.Context, held *AccountTurns, b WorkspaceCharges) (acrossPlan, bool) {
	var acct loaded[billing.State]
	var err error
	if held.Holds(b.WorkspaceID) {
		stream := BillingStream(b.WorkspaceID)
		acct, err = loadFrom(h, stream, billingAgg, held.cur[b.WorkspaceID], held.turns.EventsOf(stream))
	} else {
		acct, err = h.cachedAccount(ctx, b.WorkspaceID)
	}
	if err != nil {
		return acrossPlan{}, false
	}
	plan, err := h.planCharges(ctx, b.WorkspaceID, b.Items, acct)
	if err != nil {
		return acrossPlan{}, false
	}
	return acrossPlan{plan: plan}, true
}

// writeAcross appends every plan in one atomic append, in held's turn when there is one, and
// answers their batches; the store's error, when it refused or failed the append, answers none
// of them.
func (h *Charges) writeAcross(ctx context.Context, held *AccountTurns, batches []WorkspaceCharges, plans []acrossPlan, out []AcrossResult) error {
	if len(plans) == 0 {
		return nil
	}
	appendMulti := h.store.AppendMulti
	if turns := held.take(); turns != nil {
		appendMulti = turns.AppendMulti
	}
	var parts []eventstore.StreamAppend
	for _, p := range plans {
		parts = append(parts, p.plan.parts...)
	}
	res, err := appendMulti(ctx, parts...)
	if err != nil {
		return fmt.Errorf("charge and finish across %d workspaces: %w", len(plans), err)
	}
	for _, p := range plans {
		items := batches[p.at].Items
		results := h.chargesWritten(items, p.plan, res[:len(p.plan.parts)])
		res = res[len(p.plan.parts):]
		for i, r := range results {
			if r.Recorded {
				items[i].Claim.committed()
			}
		}
		out[p.at].Results = results
	}
	return nil
}

// refusal reports whether err is the store refusing an append it wrote nothing of, for a
// reason some batch's separate path answers (a stream moved, a replay's claim, an event
// PostgreSQL cannot store, a cause charged before). Any other failure (the database gone, the
// context ended) may have left the commit's outcome unknown, and is answered as it is.
func refusal(err error) bool {
	var ce *eventstore.ClaimedError
	return isConflict(err) || errors.As(err, &ce) || errors.Is(err, eventstore.ErrUnstorable) ||
		errors.Is(err, eventstore.ErrIdempotencyConflict)
}

// chargeAlone writes the batches at idx each the usual way, at once.
func (h *Charges) chargeAlone(ctx context.Context, batches []WorkspaceCharges, idx []int, out []AcrossResult) {
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Go(func() {
			out[i].Results, out[i].Err = h.ChargeAndFinish(ctx, batches[i].WorkspaceID, batches[i].Items)
		})
	}
	wg.Wait()
}
