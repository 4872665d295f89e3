package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
		var state, xmin *string
		err := pool.QueryRow(ctx, `SELECT state, backend_xmin::text FROM pg_stat_activity
			WHERE application_name = 'standby-under-test'`).Scan(&state, &xmin)
		if err == nil && deref(state) == "idle" && xmin == nil {
			break
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting standby was never idle without a snapshot (last seen: %q, xmin %v, %v)", deref(state), deref(xmin), err)
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

// withAppName returns cfg for another process: a lock session is per process and connection
// settings, so a different application_name stands for a second instance.
func withAppName(cfg *pgx.ConnConfig, name string) *pgx.ConnConfig {
	c := cfg.Copy()
	c.RuntimeParams["application_name"] = name
	return c
}

// A wait for a lock ends with its context, without running fn.
func TestAWaitForALockEndsWithItsContext(t *testing.T) {
	_, dsn := testdb.NewPool(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- HoldLock(t.Context(), withAppName(cfg, "holder"), "test-lock", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- HoldLock(ctx, withAppName(cfg, "waiter"), "test-lock", func(context.Context) error {
			t.Error("the waiter ran while the lock was held")
			return nil
		})
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait ended with %v, want context.Canceled", err)
	}
	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
}

// Session advisory locks are re-entrant: PostgreSQL grants a session a lock it holds again. The
// locks of a process share one session, so the session must itself refuse a name one of its
// holders has, while granting the others.
func TestTwoHoldersOfOneProcessDoNotShareALock(t *testing.T) {
	_, dsn := testdb.NewPool(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	err = HoldLock(t.Context(), cfg, "a", func(ctx context.Context) error {
		s := lockSessions.join(cfg)
		defer lockSessions.leave(s)
		if live, err := s.try(ctx, lockKey("a")); live != nil || err != nil {
			t.Errorf("a second holder of the process was given a held lock (%v)", err)
		}
		return HoldLock(ctx, cfg, "b", func(context.Context) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
}

// All the locks of a process, held or waited for, take one connection: two instances with
// twenty-one holders each (the projectors and reactors of serve) use two.
func TestTheLocksOfAProcessShareOneConnection(t *testing.T) {
	pool, dsn := testdb.NewPool(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const n = 21
	// sessions counts the connections of an instance, and the connections holding its locks.
	sessions := func(app string) (conns, holding int) {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1),
			(SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			  WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1)`, app).Scan(&conns, &holding)
		if err != nil {
			t.Fatal(err)
		}
		return conns, holding
	}
	release, releaseSecond := make(chan struct{}), make(chan struct{})
	var running sync.WaitGroup
	run := func(app string, i int, took *sync.WaitGroup, release chan struct{}) {
		defer running.Done()
		err := HoldLock(ctx, withAppName(cfg, app), fmt.Sprint("lock-", i), func(context.Context) error {
			took.Done()
			<-release
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	var firstTook, secondTook sync.WaitGroup
	firstTook.Add(n)
	secondTook.Add(n)
	running.Add(2 * n)
	for i := range n {
		go run("first", i, &firstTook, release)
	}
	firstTook.Wait()
	for i := range n {
		go run("second", i, &secondTook, releaseSecond)
	}
	if conns, holding := sessions("first"); conns != 1 || holding != 1 {
		t.Errorf("an instance holding %d locks uses %d connections, %d of them holding locks; want 1", n, conns, holding)
	}
	if conns, _ := sessions("second"); conns > 1 {
		t.Errorf("a standby waiting for %d locks uses %d connections, want at most 1", n, conns)
	}
	close(release)
	secondTook.Wait()
	if conns, holding := sessions("second"); conns != 1 || holding != 1 {
		t.Errorf("the instance that took %d locks over uses %d connections, %d of them holding locks; want 1", n, conns, holding)
	}
	close(releaseSecond)
	running.Wait()
}

// When the session's connection is lost, every holder's context ends, and the locks can be
// taken again on a new connection.
func TestALostLockSessionEndsEveryHolder(t *testing.T) {
	pool, dsn := testdb.NewPool(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg = withAppName(cfg, "lost-session")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var held sync.WaitGroup
	held.Add(2)
	ended := make(chan error, 2)
	for _, name := range []string{"a", "b"} {
		go func() {
			ended <- HoldLock(ctx, cfg, name, func(ctx context.Context) error {
				held.Done()
				<-ctx.Done()
				return ctx.Err()
			})
		}()
	}
	held.Wait()
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'lost-session'`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-ended:
		case <-ctx.Done():
			t.Fatal("a holder ran on after its session's connection was lost")
		}
	}
	if err := HoldLock(ctx, cfg, "a", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("the lock was not taken again after the session was lost: %v", err)
	}
}
