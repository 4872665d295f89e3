package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore"
)

// TestPlanBatches: which appends share a batched statement and which keep their own.
func TestPlanBatches(t *testing.T) {
	part := func(stream string, expected eventstore.ExpectedRevision, events int) encoded {
		return encoded{stream: stream, expected: expected, ids: make([][16]byte, events)}
	}
	parts := []encoded{
		0:  part("c-2", eventstore.NoStream(), 1),
		1:  part("c-1", eventstore.NoStream(), 3),
		2:  part("u-2", eventstore.Exact(4), 1),
		3:  part("u-1", eventstore.StreamExists(), 2),
		4:  part("dup", eventstore.Exact(0), 1),              // a stream twice: own statements, in order
		5:  part("any", eventstore.Any(), 1),                 // Any: own statement
		6:  part("dup", eventstore.Exact(1), 1),              //
		7:  part("big", eventstore.Exact(math.MaxUint64), 1), // beyond int64: own statement
		8:  part("none", eventstore.NoStream(), 0),           // no events: own statement
		9:  part("wf", eventstore.Exact(3), 0),               // no events at an exact revision: a check
		10: part("dup", eventstore.Exact(2), 0),              // a check of a stream written too: own statement
	}
	p := planBatches(parts)
	if want := []int{1, 0}; !slices.Equal(p.create, want) {
		t.Errorf("create = %v, want %v (by stream name)", p.create, want)
	}
	if want := []int{3, 2}; !slices.Equal(p.update, want) {
		t.Errorf("update = %v, want %v (by stream name)", p.update, want)
	}
	if want := []int{5, 7, 4, 6, 10, 8}; !slices.Equal(p.rest, want) {
		t.Errorf("rest = %v, want %v (by stream name, one stream's appends in order)", p.rest, want)
	}
	if want := []int{9}; !slices.Equal(p.checks, want) {
		t.Errorf("checks = %v, want %v", p.checks, want)
	}
	// A lone append of a kind keeps its own statement, whose plan is simpler.
	lone := planBatches([]encoded{part("c", eventstore.NoStream(), 1), part("u", eventstore.Exact(0), 1)})
	if len(lone.create)+len(lone.update) != 0 || !slices.Equal(lone.rest, []int{0, 1}) {
		t.Errorf("lone appends: %+v, want both on their own", lone)
	}
}

// An AppendMulti that creates streams in a batched statement and moves another on (a charge
// batch of executions run first) is atomic: when the moved stream's expectation fails, no
// stream is created, and when it holds, every part is written with its own result.
func TestAppendMultiWithBatchedCreatesIsAtomic(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	account := "account-" + uuid.NewString()
	if _, err := st.Append(ctx, account, eventstore.NoStream(), event("Opened"), event("Charged")); err != nil {
		t.Fatal(err)
	}
	batch := func(expected eventstore.ExpectedRevision) ([]string, []eventstore.StreamAppend) {
		parts := []eventstore.StreamAppend{{Stream: account, Expected: expected, Events: []eventstore.EventData{event("Charged")}}}
		var created []string
		for range 3 {
			name := "created-" + uuid.NewString()
			created = append(created, name)
			parts = append(parts, eventstore.StreamAppend{Stream: name, Expected: eventstore.NoStream(),
				Events: []eventstore.EventData{event("Submitted"), event("Completed")}})
		}
		return created, parts
	}
	stale, parts := batch(eventstore.Exact(0))
	_, err := st.AppendMulti(ctx, parts...)
	var wrong *eventstore.WrongExpectedVersionError
	if !errors.As(err, &wrong) || wrong.Stream != account {
		t.Fatalf("AppendMulti with a stale account = %v, want its wrong expected version", err)
	}
	for _, name := range stale {
		if evs, err := st.ReadStream(ctx, name, 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
			t.Fatalf("declined batch created %s: %d events, %v", name, len(evs), err)
		}
	}
	created, parts := batch(eventstore.Exact(1))
	res, err := st.AppendMulti(ctx, parts...)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].NextRevision != 2 {
		t.Fatalf("account moved to %d, want 2", res[0].NextRevision)
	}
	for i, name := range created {
		evs, err := st.ReadStream(ctx, name, 0, 10)
		if err != nil || len(evs) != 2 || res[i+1].NextRevision != 1 || res[i+1].Position != evs[1].Position {
			t.Fatalf("created %s: %d events, %v; result %+v", name, len(evs), err, res[i+1])
		}
	}
}

// A check (a part without events at an exact revision) rides in the fast path's one round trip:
// multiFast writes beside a check that holds, and declines (writing nothing) beside one that
// does not, for the slow path to name.
func TestAChecksFastPath(t *testing.T) {
	pool, _ := newMigratedDB(t, 4)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	checked := "workflow-" + uuid.NewString()
	if _, err := st.Append(ctx, checked, eventstore.NoStream(), event("Created"), event("Updated")); err != nil {
		t.Fatal(err)
	}
	multi := func(rev uint64) (string, bool, error) {
		made := "run-" + uuid.NewString()
		parts, err := (&Store{}).encodeParts([]eventstore.StreamAppend{
			{Stream: checked, Expected: eventstore.Exact(rev)},
			{Stream: made, Expected: eventstore.NoStream(), Events: []eventstore.EventData{event("Triggered")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, ok, err := st.multiFast(ctx, st.pool, parts, claimSet{}, false)
		return made, ok, err
	}
	made, ok, err := multi(1)
	if err != nil || !ok {
		t.Fatalf("fast path beside a check that holds: ok %v, %v; want it written", ok, err)
	}
	if evs, err := st.ReadStream(ctx, made, 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("%s after the fast path: %d events, %v; want 1", made, len(evs), err)
	}
	made, ok, err = multi(0)
	if err != nil || ok {
		t.Fatalf("fast path beside a stale check: ok %v, %v; want it declined", ok, err)
	}
	if _, err := st.ReadStream(ctx, made, 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("a declined fast path created %s: %v", made, err)
	}
}

// A multi-append whose transaction PostgreSQL rolls back to break a deadlock wrote nothing, so
// it goes again on the slow path instead of failing its caller: a charge round carries several
// workspaces, and the deadlock is no fault of theirs.
func TestAppendMultiGoesOnAfterADeadlock(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	// PostgreSQL rolls back the transaction whose deadlock check runs while the cycle exists.
	// The multi-append waits first, so its check (deadlock_timeout after it began waiting)
	// usually finds the cycle, but on a loaded machine the other's second lock can come after
	// that check found none, and then the other is the one rolled back: go again on new streams.
	const attempts = 5
	for i := range attempts {
		a, b := fmt.Sprintf("account-a%d-%s", i, uuid.NewString()), fmt.Sprintf("account-b%d-%s", i, uuid.NewString())
		if deadlockMulti(t, ctx, st, pool, a, b) {
			for _, s := range []string{a, b} {
				evs, err := st.ReadStream(ctx, s, 0, 10)
				if err != nil || len(evs) != 2 {
					t.Fatalf("%s: %d events, %v; want 2", s, len(evs), err)
				}
			}
			return
		}
		t.Logf("attempt %d: the other transaction was the one rolled back; again", i+1)
	}
	t.Fatalf("in %d attempts PostgreSQL never rolled back the multi-append", attempts)
}

// deadlockMulti makes a multi-append on a and b and another transaction wait for each other,
// and reports whether the multi-append was the one PostgreSQL rolled back; either way the
// multi-append must succeed.
func deadlockMulti(t *testing.T, ctx context.Context, st *Store, pool *pgxpool.Pool, a, b string) bool {
	t.Helper()
	for _, s := range []string{a, b} {
		if _, err := st.Append(ctx, s, eventstore.NoStream(), event("Opened")); err != nil {
			t.Fatal(err)
		}
	}
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after the rollback below
	if _, err := other.Exec(ctx, `UPDATE streams SET revision = revision WHERE name = $1`, b); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// Takes a's row, then waits for b's, which the other holds.
		_, err := st.AppendMulti(ctx,
			eventstore.StreamAppend{Stream: a, Expected: eventstore.Exact(0), Events: []eventstore.EventData{event("Charged")}},
			eventstore.StreamAppend{Stream: b, Expected: eventstore.Exact(0), Events: []eventstore.EventData{event("Charged")}})
		done <- err
	}()
	pollUntil(t, "the multi-append to wait for "+b, func() bool {
		var waiting int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting > 0
	})
	// The other now wants a: a cycle, which PostgreSQL breaks by rolling one back.
	_, err = other.Exec(ctx, `UPDATE streams SET revision = revision WHERE name = $1`, a)
	var pgErr *pgconn.PgError
	otherRolledBack := errors.As(err, &pgErr) && pgErr.Code == "40P01"
	if err != nil && !otherRolledBack {
		t.Fatal(err)
	}
	if err := other.Rollback(ctx); err != nil && !otherRolledBack {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a multi-append in a deadlock failed: %v", err)
	}
	return !otherRolledBack
}
