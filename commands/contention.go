package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
)

// Taking turns on a hot stream. An instance decides a workspace's charges on the account state
// it has cached and appends at that revision. Alone, it is always right. With another instance
// charging the same workspace, both append continually, each moves the account under the
// other's in-flight batch, and about every other batch is refused, rolled back and decided
// again: with two instances a third of the batches were refused, and the rate of the two fell to
// about 0.6 of one. Once refused, an instance takes turns for contendedFor: it reads on, decides
// and appends within a turn on the account (eventstore.StreamTurns), so the batches of the
// instances follow each other instead of colliding. Alone, an instance never takes a turn.
const (
	// contendedFor is how long after a refusal an instance takes turns on the stream.
	contendedFor = 10 * time.Second
	// turnWait bounds the wait for a turn; past it the batch goes ahead without, as before.
	turnWait = 2 * time.Second
)

// takeTurn waits for a turn on stream, reading it on from revision from, when another process
// has recently appended to it under this one; nil when there is no turn to take (no recent
// contention, a store without turns, or no turn within turnWait).
func (h *Charges) takeTurn(ctx context.Context, stream string, from uint64) eventstore.Turn {
	if !h.contendedNow(stream) {
		return nil
	}
	turns, ok := h.store.(eventstore.StreamTurns)
	if !ok {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, turnWait)
	defer cancel()
	turn, err := turns.TakeTurn(wctx, stream, from)
	if err != nil {
		return nil
	}
	return turn
}

// contendedNow reports whether another process appended to stream under this one within
// contendedFor.
func (h *Charges) contendedNow(stream string) bool {
	at, ok := h.contended.Load(stream)
	if !ok {
		return false
	}
	if time.Since(at.(time.Time)) >= contendedFor {
		h.contended.CompareAndDelete(stream, at)
		return false
	}
	return true
}

// AccountTurn is a turn on a workspace's account taken before a charge batch is gathered
// (AwaitAccountTurn): the batch then holds every charge that queued while the turn was awaited,
// instead of waiting for the next turn.
type AccountTurn struct {
	cur  loaded[billing.State] // the cached account the turn read on from
	turn eventstore.Turn
}

// AwaitAccountTurn waits for a turn on the workspace's account when this process takes turns
// on it (another process charged it under this one recently), and returns nil otherwise. Pass
// it to ChargeAndFinishIn, which ends it.
func (h *Charges) AwaitAccountTurn(ctx context.Context, workspaceID string) *AccountTurn {
	stream := BillingStream(workspaceID)
	cur, from, _ := cachedState(h, stream, billingAgg)
	if h.guardable(stream, cur) {
		return nil // the batch waits for its turn in its own round trip (chargeGuarded)
	}
	turn := h.takeTurn(ctx, stream, from)
	if turn == nil {
		return nil
	}
	return &AccountTurn{cur: cur, turn: turn}
}

// take hands the turn over once: the account it read on from, and the turn (nil when none).
func (t *AccountTurn) take() (loaded[billing.State], eventstore.Turn) {
	if t == nil || t.turn == nil {
		return loaded[billing.State]{}, nil
	}
	turn := t.turn
	t.turn = nil
	return t.cur, turn
}

// End ends a turn that was not handed over.
func (t *AccountTurn) End() {
	if _, turn := t.take(); turn != nil {
		turn.End()
	}
}

// Guarded charges. A turn (takeTurn) holds the account's lock over two round trips, the read
// on and then the append, with the decision between them; under two instances the batches of
// both follow each other at that pace. A charge batch decided on the cached account holds
// whatever charges and top-ups another process appended since, as long as they leave the
// balance the batch leaves (each charge then passes DecideCharge in log order, as decided) and
// the plan-included balance is spent (the split takes nothing from it, whatever came between).
// Such a batch is appended at whatever revision the account has, in one round trip that waits
// for the turn on the server, checks that guard after the appends and reads the others' events
// for the cache (eventstore.GuardedAppends). A guard that does not hold writes nothing, and the
// batch is decided again within a turn.

// guardMaxEvents bounds the events another process may have appended since the cached account
// for a guarded batch; past it, the batch reads on within a turn.
const guardMaxEvents = 1000

// guardable reports whether a charge batch on stream, contended, can be decided on its cached
// account cur and appended guarded (chargeGuarded).
func (h *Charges) guardable(stream string, cur loaded[billing.State]) bool {
	if _, ok := h.store.(eventstore.GuardedAppends); !ok || !cur.exists || cur.state.Usage > 0 {
		return false
	}
	return h.contendedNow(stream)
}

// chargeGuarded is one try of chargeAndFinish on the cached account cur, appended guarded. It
// fails with eventstore.ErrGuardRefused, nothing written, when the guard does not hold or the
// batch refuses a charge for credits a read on might find.
func (h *Charges) chargeGuarded(ctx context.Context, workspaceID string, items []ChargedFinish, cur loaded[billing.State]) ([]FinishResult, error) {
	stream := BillingStream(workspaceID)
	plan, err := h.planCharges(ctx, workspaceID, items, cur)
	if err != nil || plan.charges == 0 {
		return plan.results, err
	}
	for _, r := range plan.results {
		if errors.Is(r.Err, domain.ErrInsufficientCredits) {
			return nil, fmt.Errorf("charge in %s: %w", workspaceID, eventstore.ErrGuardRefused)
		}
	}
	plan.parts[0].Expected = eventstore.Any()
	g := eventstore.Guard{Stream: stream, From: cur.revision + 1,
		Types:     []string{billing.CreditsCharged{}.EventType(), billing.CreditsPurchased{}.EventType()},
		MaxEvents: guardMaxEvents, SumType: billing.CreditsCharged{}.EventType(), SumField: "amount",
		SumMax: plan.acct.state.Total().String()}
	res, others, err := h.store.(eventstore.GuardedAppends).AppendGuarded(ctx, g, plan.parts...)
	if err != nil {
		return nil, err
	}
	// The account after: the cached one, the others' events, then the batch's charges.
	acct, err := loadFrom(h, stream, billingAgg, cur, others)
	if err != nil {
		h.cache.drop(stream)
		acct = plan.acct
		acct.exists = false // not cached below: the next batch reads the account
	}
	for _, e := range plan.chargeEvents {
		acct.state = acct.state.Evolve(e)
	}
	plan.acct = acct
	results := h.chargesWritten(items, plan, res)
	if err != nil {
		h.cache.drop(stream)
	}
	return results, nil
}
