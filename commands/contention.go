package commands

import (
	"context"
	"time"

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
	at, ok := h.contended.Load(stream)
	if !ok {
		return nil
	}
	if time.Since(at.(time.Time)) >= contendedFor {
		h.contended.CompareAndDelete(stream, at)
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
