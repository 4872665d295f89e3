package projections

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/testdb"
)

// A process waiting for a lock another holds waits between statements, never inside one: a
// backend blocked in pg_advisory_lock keeps its snapshot, and with it the database's xmin
// horizon, for as long as it waits, so no dead row version could be pruned meanwhile. Once the
// holder lets go, the waiter takes over.
func TestAWaitingStandbyHoldsNoSnapshot(t *testing.T) {
	pool, dsn := testdb.NewPool(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	held, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- HoldLock(ctx, cfg, "test-lock", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held

	standby := cfg.Copy()
	standby.RuntimeParams["application_name"] = "standby-under-test"
	took := make(chan struct{})
	waiter := make(chan error, 1)
	go func() {
		waiter <- HoldLock(ctx, standby, "test-lock", func(context.Context) error {
			close(took)
			return nil
		})
	}()

	// The standby is connected and waiting; it must be seen idle, holding no snapshot.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var state string
		var xmin *string
		err := pool.QueryRow(ctx, `SELECT state, backend_xmin::text FROM pg_stat_activity
			WHERE application_name = 'standby-under-test'`).Scan(&state, &xmin)
		if err == nil && state == "idle" && xmin == nil {
			break
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting standby was never idle without a snapshot (last seen: %q, xmin %v, %v)", state, deref(xmin), err)
		}
		time.Sleep(10 * time.Millisecond) // polling pg_stat_activity: there is no event to wait on
	}
	select {
	case <-took:
		t.Fatal("the standby took a lock that was held")
	default:
	}

	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	select {
	case <-took:
	case <-ctx.Done():
		t.Fatal("the standby did not take the lock once it was free")
	}
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A wait for a lock ends with its context.
func TestWaitForLockEndsWithItsContext(t *testing.T) {
	_, dsn := testdb.NewPool(t)
	a, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	b, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if err := waitForLock(t.Context(), a, 42, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- waitForLock(ctx, b, 42, time.Millisecond) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait ended with %v, want context.Canceled", err)
	}
}
