package commands_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

// guardCounter is refusalCounter passing guarded appends on too, counting those written and
// those refused.
type guardCounter struct {
	refusalCounter
	guarded, guardRefused atomic.Int64
}

func (s *guardCounter) AppendGuarded(ctx context.Context, g eventstore.Guard, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, []eventstore.RecordedEvent, error) {
	res, seen, err := s.Store.(eventstore.GuardedAppends).AppendGuarded(ctx, g, appends...)
	switch {
	case err == nil:
		s.guarded.Add(1)
	case errors.Is(err, eventstore.ErrGuardRefused):
		s.guardRefused.Add(1)
	}
	return res, seen, err
}

// contend makes a take turns on ws's account: a charges on an account b moved under its
// cached one, and is refused once.
func contend(t *testing.T, a, b *commands.Commands, ws string, ids []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := a.Billing.Balance(ctx, ws); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*commands.Commands{b, a} {
		res, err := h.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{claimAndComplete(h, ids[0])})
		if err != nil || !res[0].Recorded {
			t.Fatalf("charge: %+v, %v", res, err)
		}
		ids = ids[1:]
	}
}

// Once contended, a charge batch decided on the cached account is appended guarded: written in
// one round trip when what the other process charged since leaves the balance the batch
// leaves, with the account cached as it is after both; refused, and decided again on the
// account read on, when it would not. Nothing is charged twice and the balance never goes
// below zero.
func TestGuardedChargeBatches(t *testing.T) {
	env := testenv.New(t)
	store := &guardCounter{refusalCounter: refusalCounter{Store: env.Store}}
	a, b := commands.New(store), commands.New(store)
	ctx := context.Background()
	ws := env.Workspace(t, 7)
	ids := submitEchoes(t, a, ws, 8)
	contend(t, a, b, ws, ids[:2]) // 5 credits left

	// b charges one; a's batch of one, decided on its cached account, is guarded and written.
	for _, step := range []struct {
		h   *commands.Commands
		ids []string
	}{{b, ids[2:3]}, {a, ids[3:4]}} {
		res, err := step.h.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{claimAndComplete(step.h, step.ids[0])})
		if err != nil || res[0].Err != nil || !res[0].Recorded {
			t.Fatalf("charge: %+v, %v", res, err)
		}
	}
	if store.guarded.Load() == 0 {
		t.Fatal("a contended charge batch on a cached account was not appended guarded")
	}
	fresh := commands.New(env.Store)
	if got, want := balance(t, a, ws), balance(t, fresh, ws); got != want || want != billing.FromWhole(3) {
		t.Fatalf("balance cached after the guarded batch %s, in the log %s, want 3", got, want)
	}

	// b charges two of the three left; a's batch of two on its cached account (3) would leave
	// 1, less than b charged since: refused, decided again on the account read on, and only
	// one of its charges fits.
	if _, err := a.Billing.Balance(ctx, ws); err != nil {
		t.Fatal(err)
	}
	res, err := b.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{claimAndComplete(b, ids[4]), claimAndComplete(b, ids[5])})
	if err != nil || !res[0].Recorded || !res[1].Recorded {
		t.Fatalf("b's charges: %+v, %v", res, err)
	}
	refused := store.guardRefused.Load()
	res, err = a.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{claimAndComplete(a, ids[6]), claimAndComplete(a, ids[7])})
	if err != nil {
		t.Fatal(err)
	}
	if store.guardRefused.Load() == refused {
		t.Fatal("a guarded batch charging more than the balance others left was not refused")
	}
	recorded, short := 0, 0
	for _, r := range res {
		switch {
		case r.Err == nil && r.Recorded:
			recorded++
		case errors.Is(r.Err, domain.ErrInsufficientCredits):
			short++
		}
	}
	if recorded != 1 || short != 1 {
		t.Fatalf("a's batch of two on one credit: %+v; want one charged, one short of credits", res)
	}
	for _, h := range []*commands.Commands{a, b, fresh} {
		if got := balance(t, h, ws); got != 0 {
			t.Fatalf("balance %s after seven charges of seven credits, want 0", got)
		}
	}
}

// Two processes charging one workspace at once, contended and guarded, past its balance: each
// execution is charged at most once, exactly the balance is charged, and it ends at zero.
func TestGuardedChargesConcurrently(t *testing.T) {
	env := testenv.New(t)
	store := &guardCounter{refusalCounter: refusalCounter{Store: env.Store}}
	a, b := commands.New(store), commands.New(store)
	const credits, perProcess = 30, 20
	ws := env.Workspace(t, credits)
	ids := submitEchoes(t, a, ws, 4+2*perProcess)
	contend(t, a, b, ws, ids[:2])
	contend(t, b, a, ws, ids[2:4])
	var charged, short atomic.Int64
	var wg sync.WaitGroup
	for i, h := range []*commands.Commands{a, b} {
		mine := ids[4+i*perProcess : 4+(i+1)*perProcess]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < len(mine); j += 2 {
				res, err := h.Charges.ChargeAndFinish(context.Background(), ws,
					[]commands.ChargedFinish{claimAndComplete(h, mine[j]), claimAndComplete(h, mine[j+1])})
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range res {
					switch {
					case r.Err == nil && r.Recorded:
						charged.Add(1)
					case errors.Is(r.Err, domain.ErrInsufficientCredits):
						short.Add(1)
					default:
						t.Errorf("charge: %+v", r)
					}
				}
			}
		}()
	}
	wg.Wait()
	if charged.Load() != credits-4 || short.Load() != 2*perProcess-(credits-4) {
		t.Fatalf("%d charged, %d short of credits; want %d and %d", charged.Load(), short.Load(), credits-4, 2*perProcess-(credits-4))
	}
	if got := balance(t, commands.New(env.Store), ws); got != 0 {
		t.Fatalf("balance %s, want 0", got)
	}
	var events, causes int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT data->>'cause') FROM events WHERE stream = $1 AND type = 'CreditsCharged'`,
		commands.BillingStream(ws)).Scan(&events, &causes); err != nil {
		t.Fatal(err)
	}
	if events != credits || causes != credits {
		t.Fatalf("%d charges for %d causes, want %d of each", events, causes, credits)
	}
	if store.guarded.Load() == 0 {
		t.Fatal("no batch was appended guarded")
	}
}
