package commands

import (
	"context"
	"strings"
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
	// contendedFor is how long after a refusal an instance takes turns on the stream (Contended).
	contendedFor = 10 * time.Second
	// maxTurnAccounts bounds the accounts of one turn (AwaitAccountTurns): each is an advisory
	// lock in PostgreSQL's shared lock table (max_locks_per_transaction, 64 by default, a
	// connection) until the turn's commit. A round leaves the accounts beyond it for the next.
	maxTurnAccounts = 64
	// turnWait bounds the wait for a turn; past it the batch goes ahead without, as before.
	turnWait = 2 * time.Second
)

// takeTurn waits for a turn on stream, reading it on from revision from, when another process
// has recently appended to it under this one; nil when there is no turn to take (no recent
// contention, a store without turns, or no turn within turnWait).
func (h *Charges) takeTurn(ctx context.Context, stream string, from uint64) eventstore.Turn {
	if !h.contendedStream(stream) {
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

// Contended reports whether this process takes turns on the workspace's account: another
// process charged it under this one within contendedFor.
func (h *Charges) Contended(workspaceID string) bool {
	return h.contendedStream(BillingStream(workspaceID))
}

// contendedStream reports whether another process appended to stream under this one within
// contendedFor, and forgets an older refusal.
func (h *Charges) contendedStream(stream string) bool {
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

// AccountTurns is a turn on several workspaces' accounts at once, taken before their charge
// batches are gathered (AwaitAccountTurns): one commit then writes all their batches.
type AccountTurns struct {
	cur   map[string]loaded[billing.State] // by workspace: the cached account the turn read on from
	turns eventstore.Turns
}

// AwaitAccountTurns waits for one turn on the accounts of the workspaces this process takes
// turns on (Contended), on a store that takes turns on several streams at once; nil when there
// is none to take, or no turn within turnWait. Pass it to ChargeAndFinishAcross, which ends it.
func (h *Charges) AwaitAccountTurns(ctx context.Context, workspaceIDs []string) *AccountTurns {
	turns, ok := h.store.(eventstore.StreamsTurns)
	if !ok {
		return nil
	}
	held := &AccountTurns{cur: map[string]loaded[billing.State]{}}
	from := map[string]uint64{}
	add := func(ws string) {
		stream := BillingStream(ws)
		held.cur[ws], from[stream], _ = cachedState(h, stream, billingAgg)
	}
	for _, ws := range workspaceIDs {
		if len(from) < maxTurnAccounts && h.Contended(ws) {
			add(ws)
		}
	}
	if len(from) == 0 {
		return nil
	}
	// The turn takes every other account this process takes turns on as well, up to
	// maxTurnAccounts: charges for them that queue during the wait then join the round,
	// instead of waiting for the other process's next turn and then this one's.
	h.contended.Range(func(k, _ any) bool {
		if len(from) >= maxTurnAccounts {
			return false
		}
		stream := k.(string)
		ws, ok := strings.CutPrefix(stream, BillingStream(""))
		if _, in := held.cur[ws]; ok && !in && h.contendedStream(stream) {
			add(ws)
		}
		return true
	})
	wctx, cancel := context.WithTimeout(ctx, turnWait)
	defer cancel()
	t, err := turns.TakeTurns(wctx, from)
	if err != nil {
		return nil
	}
	held.turns = t
	return held
}

// Holds reports whether the turn is on the workspace's account (false for nil).
func (t *AccountTurns) Holds(workspaceID string) bool {
	if t == nil || t.turns == nil {
		return false
	}
	_, ok := t.cur[workspaceID]
	return ok
}

// take hands the turn over once; nil when it has been, or there is none.
func (t *AccountTurns) take() eventstore.Turns {
	if t == nil || t.turns == nil {
		return nil
	}
	turns := t.turns
	t.turns = nil
	return turns
}

// End ends a turn that was not handed over.
func (t *AccountTurns) End() {
	if turns := t.take(); turns != nil {
		turns.End()
	}
}
