package commands

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
)

// heldAccountStore answers reads of one account, each held until release closes.
type heldAccountStore struct {
	eventstore.Store
	account []eventstore.RecordedEvent
	reads   atomic.Int32
	release chan struct{}
}

func (s *heldAccountStore) ReadStream(ctx context.Context, stream string, from uint64, _ int) ([]eventstore.RecordedEvent, error) {
	s.reads.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if from >= uint64(len(s.account)) {
		return nil, nil
	}
	return s.account[from:], nil
}

func newHeldAccountStore(t *testing.T, workspaceID string, credits billing.Credits) *heldAccountStore {
	t.Helper()
	data, err := encodeEvents(context.Background(), []domain.Event{
		billing.CreditsPurchased{WorkspaceID: workspaceID, Amount: credits, At: time.Unix(0, 0).UTC()}})
	if err != nil {
		t.Fatal(err)
	}
	rec := eventstore.RecordedEvent{ID: data[0].ID, Stream: BillingStream(workspaceID), Type: data[0].Type, Data: data[0].Data}
	return &heldAccountStore{account: []eventstore.RecordedEvent{rec}, release: make(chan struct{})}
}

// Submits that find the remembered balance expired together share one read of the account:
// with another process charging it, each read decodes every charge since the last one.
func TestSubmitsShareOneBalanceRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newHeldAccountStore(t, "w1", 10*billing.Credits(billing.Milli))
		h := New(store)
		const callers = 8
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { errs[i] = h.Executions.checkBalance(t.Context(), "w1", 1000) })
		}
		synctest.Wait() // every caller is waiting: on the read, or on another's
		if n := store.reads.Load(); n != 1 {
			t.Errorf("%d reads of the account in flight for %d callers, want 1", n, callers)
		}
		close(store.release)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		}
		// The read is remembered: a check within balanceTTL reads nothing.
		if err := h.Executions.checkBalance(t.Context(), "w1", 1000); err != nil {
			t.Fatal(err)
		}
		if n := store.reads.Load(); n != 1 {
			t.Errorf("%d reads after a check within the TTL, want 1", n)
		}
		// A cost above the shared balance is refused by every caller.
		if err := h.Executions.checkBalance(t.Context(), "w1", 11_000); !errors.Is(err, domain.ErrInsufficientCredits) {
			t.Errorf("a cost above the balance: %v, want ErrInsufficientCredits", err)
		}
	})
}

// A shared read outlives the caller that started it: that caller ends with its own
// cancellation at once, and the others still get the balance.
func TestABalanceReadOutlivesItsFirstCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newHeldAccountStore(t, "w1", 10*billing.Credits(billing.Milli))
		h := New(store)
		first, cancel := context.WithCancel(t.Context())
		var firstErr, secondErr error
		var wg sync.WaitGroup
		wg.Go(func() { firstErr = h.Executions.checkBalance(first, "w1", 1000) })
		synctest.Wait()
		wg.Go(func() { secondErr = h.Executions.checkBalance(t.Context(), "w1", 1000) })
		synctest.Wait()
		cancel()
		synctest.Wait() // the first caller has returned; the read is still held
		if !errors.Is(firstErr, context.Canceled) {
			t.Errorf("the cancelled caller ended with %v, want context.Canceled", firstErr)
		}
		close(store.release)
		wg.Wait()
		if secondErr != nil {
			t.Errorf("the second caller failed with the first's cancellation: %v", secondErr)
		}
		if n := store.reads.Load(); n != 1 {
			t.Errorf("%d reads, want 1", n)
		}
	})
}
