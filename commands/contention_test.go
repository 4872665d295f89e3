package commands_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
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

func (s *refusalCounter) TakeTurns(ctx context.Context, from map[string]uint64) (eventstore.Turns, error) {
	t, err := s.Store.(eventstore.StreamsTurns).TakeTurns(ctx, from)
	if err != nil {
		return nil, err
	}
	return &countedTurns{Turns: t, refused: &s.refused}, nil
}

// countedTurns counts the refusals of a turn's append on several streams.
type countedTurns struct {
	eventstore.Turns
	refused *atomic.Int64
}

func (t *countedTurns) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	res, err := t.Turns.AppendMulti(ctx, appends...)
	if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.refused.Add(1)
	}
	return res, err
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
	for i, pair := range [][2]*commands.Commands{{a, b}, {b, a}} {
		stale, mover := pair[0], pair[1]
		if _, err := stale.Billing.Balance(context.Background(), ws); err != nil { // caches the account
			t.Fatal(err)
		}
		if _, err := mover.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(mover, ids[2*i])}); err != nil {
			t.Fatal(err)
		}
		before := store.refused.Load()
		if _, err := stale.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(stale, ids[2*i+1])}); err != nil {
			t.Fatal(err)
		}
		if store.refused.Load() != before+1 {
			t.Fatalf("a charge on a moved account was refused %d times, want once", store.refused.Load()-before)
		}
	}
	store.refused.Store(0)
	var wg sync.WaitGroup
	for i, h := range []*commands.Commands{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids[4+i*(n-1) : 4+(i+1)*(n-1)] {
				res, err := h.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(h, id)})
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

// A turn awaited before its batch is gathered (as the executor's charger does while another
// process charges the workspace) decides the batch on the account as the turn read it, and a
// turn left unused is released.
func TestChargeBatchInAnAwaitedTurn(t *testing.T) {
	env := testenv.New(t)
	store := &refusalCounter{Store: env.Store}
	a, b := commands.New(store), commands.New(store)
	ws := env.Workspace(t, 4)
	ids := submitEchoes(t, a, ws, 4)
	ctx := context.Background()
	if held := a.Charges.AwaitAccountTurns(ctx, []string{ws}); held != nil {
		held.End()
		t.Fatal("a process that was never refused on the account took a turn on it")
	}
	// a is refused once, for an account b moved under its cached one: it takes turns now.
	if _, err := a.Billing.Balance(ctx, ws); err != nil {
		t.Fatal(err)
	}
	for i, h := range []*commands.Commands{b, a} {
		if _, err := h.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{claimAndComplete(h, ids[i])}); err != nil {
			t.Fatal(err)
		}
	}
	// b moves the account again; a's turn reads that charge on from a's cached account, and
	// its batch takes the last two credits without a refusal.
	if _, err := b.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{claimAndComplete(b, ids[2])}); err != nil {
		t.Fatal(err)
	}
	unused := a.Charges.AwaitAccountTurns(ctx, []string{ws})
	if unused == nil {
		t.Fatal("a process refused on the account took no turn on it")
	}
	unused.End()
	held := a.Charges.AwaitAccountTurns(ctx, []string{ws}) // within turnWait only if End released the lock
	if held == nil {
		t.Fatal("no turn after the last one ended unused")
	}
	if _, err := a.Billing.Balance(ctx, ws); err != nil { // the process reads the account meanwhile
		t.Fatal(err)
	}
	refused := store.refused.Load()
	out := a.Charges.ChargeAndFinishAcross(ctx, held, []commands.WorkspaceCharges{{WorkspaceID: ws, Items: []commands.ChargedFinish{claimAndComplete(a, ids[3])}}})
	if out[0].Err != nil || out[0].Results[0].Err != nil || !out[0].Results[0].Recorded {
		t.Fatalf("charge in the awaited turn: %+v", out[0])
	}
	if got := store.refused.Load() - refused; got != 0 {
		t.Fatalf("the batch in the awaited turn was refused %d times, want none", got)
	}
	for _, h := range []*commands.Commands{commands.New(env.Store), a} {
		if got := balance(t, h, ws); got != 0 {
			t.Fatalf("balance %s after four charges of four credits, want 0", got)
		}
	}
}

// A turn awaited for one contended account takes every other account the process takes turns
// on as well, so their charges that queue during the wait join the round; an account the
// process has never been refused on is left alone.
func TestATurnCoversEveryContendedAccount(t *testing.T) {
	env := testenv.New(t)
	a, b := commands.New(env.Store), commands.New(env.Store)
	ctx := context.Background()
	wss := []string{env.Workspace(t, 4), env.Workspace(t, 4), env.Workspace(t, 4)}
	for _, ws := range wss[:2] {
		ids := submitEchoes(t, a, ws, 2)
		if _, err := a.Billing.Balance(ctx, ws); err != nil { // a caches the account
			t.Fatal(err)
		}
		for i, h := range []*commands.Commands{b, a} { // b moves it; a is refused once
			if _, err := h.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{claimAndComplete(h, ids[i])}); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := a.Charges.AwaitAccountTurns(ctx, []string{wss[0], wss[2]})
	if held == nil {
		t.Fatal("no turn on a contended account")
	}
	defer held.End()
	if !held.Holds(wss[0]) || !held.Holds(wss[1]) || held.Holds(wss[2]) {
		t.Fatalf("the turn holds %v, %v, %v; want the two contended accounts only", held.Holds(wss[0]), held.Holds(wss[1]), held.Holds(wss[2]))
	}
}
