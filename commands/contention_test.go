package commands_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/testenv"
)

// refusalCounter counts the multi appends refused for a moved stream, and passes the store's
// turns on.
type refusalCounter struct {
	eventstore.Store
	refused atomic.Int64
}

func (s *refusalCounter) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	res, err := s.Store.AppendMulti(ctx, appends...)
	if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		s.refused.Add(1)
	}
	return res, err
}

func (s *refusalCounter) TakeTurn(ctx context.Context, stream string, from uint64) (eventstore.Turn, error) {
	t, err := s.Store.(eventstore.StreamTurns).TakeTurn(ctx, stream, from)
	if err != nil {
		return nil, err
	}
	return &countedTurn{Turn: t, refused: &s.refused}, nil
}

// countedTurn counts the refusals of a turn's append too.
type countedTurn struct {
	eventstore.Turn
	refused *atomic.Int64
}

func (t *countedTurn) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	res, err := t.Turn.AppendMulti(ctx, appends...)
	if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.refused.Add(1)
	}
	return res, err
}

// Two processes charging one workspace take turns once one has been refused for a moved
// account: their batches follow each other instead of colliding, and every charge is made.
func TestChargersOfOneWorkspaceTakeTurns(t *testing.T) {
	env := testenv.New(t)
	store := &refusalCounter{Store: env.Store}
	a, b := commands.New(store), commands.New(store)
	const n = 20
	ws := env.Workspace(t, 2*n+2)
	ids := submitEchoes(t, a, ws, 2*n+2)
	// Each is refused once, in turn: it charges on an account the other has moved.
	for i, pair := range [][2]*commands.Handler{{a, b}, {b, a}} {
		stale, mover := pair[0], pair[1]
		if _, err := stale.Balance(context.Background(), ws); err != nil { // caches the account
			t.Fatal(err)
		}
		if _, err := mover.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(mover, ids[2*i])}); err != nil {
			t.Fatal(err)
		}
		before := store.refused.Load()
		if _, err := stale.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(stale, ids[2*i+1])}); err != nil {
			t.Fatal(err)
		}
		if store.refused.Load() != before+1 {
			t.Fatalf("a charge on a moved account was refused %d times, want once", store.refused.Load()-before)
		}
	}
	store.refused.Store(0)
	var wg sync.WaitGroup
	for i, h := range []*commands.Handler{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids[4+i*(n-1) : 4+(i+1)*(n-1)] {
				res, err := h.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(h, id)})
				if err != nil || !res[0].Recorded {
					t.Errorf("charge of %s: %+v, %v", id, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := store.refused.Load(); got != 0 {
		t.Fatalf("%d batches refused while the two took turns, want none", got)
	}
	if got := balance(t, commands.New(env.Store), ws); got != 0 {
		t.Fatalf("balance %s after every charge, want 0", got)
	}
}
