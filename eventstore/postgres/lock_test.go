package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/eventstore"
)

// A stream's lock is held by one writer at a time: a second waits until the first releases it,
// while another stream's lock is free; a wait cut short holds nothing.
func TestLockStream(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	unlock, err := st.LockStream(ctx, "billing-a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := st.LockStream(ctx, "billing-b")
	if err != nil {
		t.Fatalf("another stream's lock: %v", err)
	}
	other()

	cut, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := st.LockStream(cut, "billing-a")
		cancelled <- err
	}()
	waitForLockWaiters(t, st, 1)
	cancel()
	if err := <-cancelled; err == nil {
		t.Fatal("a lock wait cut short by its context took the lock")
	}

	got := make(chan func(), 1)
	go func() {
		u, err := st.LockStream(ctx, "billing-a")
		if err != nil {
			t.Error(err)
			u = func() {}
		}
		got <- u
	}()
	waitForLockWaiters(t, st, 1)
	select {
	case <-got:
		t.Fatal("the second writer took the lock the first holds")
	default:
	}
	unlock()
	(<-got)()
	waitForLockWaiters(t, st, 0)
}

// waitForLockWaiters waits until n sessions wait for a stream lock.
func waitForLockWaiters(t *testing.T, st *Store, n int) {
	t.Helper()
	pollUntil(t, "stream lock waiters", func() bool {
		var waiting int
		err := st.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND classid = $1 AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
			streamLockClass).Scan(&waiting)
		return err == nil && waiting == n
	})
}

// Stream locks hold at most a quarter of the pool's connections: past that a writer waits for
// one to be released rather than take the connections every holder needs for its appends.
func TestLockStreamLeavesConnectionsForAppends(t *testing.T) {
	pool, _ := newMigratedDB(t, 8) // two connections for stream locks
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	first, err := st.LockStream(ctx, "billing-a")
	if err != nil {
		t.Fatal(err)
	}
	second, err := st.LockStream(ctx, "billing-b")
	if err != nil {
		t.Fatal(err)
	}
	// The holders can still append.
	if _, err := st.Append(ctx, "billing-a", eventstore.NoStream(), event("Charged")); err != nil {
		t.Fatalf("append while stream locks are held: %v", err)
	}
	// A third writer waits for a slot, not for a connection: here until its context ends.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := st.LockStream(cancelled, "billing-c"); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "every connection for stream locks is taken") {
		t.Fatalf("a third stream lock with two held on a pool of eight: %v, want a wait for a slot", err)
	}
	first()
	third, err := st.LockStream(ctx, "billing-c")
	if err != nil {
		t.Fatalf("a stream lock once a slot is free: %v", err)
	}
	third()
	second()
}
