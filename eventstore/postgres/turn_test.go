package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/eventstore"
)

// A stream's turn is held by one writer at a time: a second waits until the first's append
// has committed, and then reads it; another stream's turn is free; a wait cut short holds
// nothing.
func TestTakeTurn(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	if _, err := st.Append(ctx, "billing-a", eventstore.NoStream(), event("Opened")); err != nil {
		t.Fatal(err)
	}
	first, err := st.TakeTurn(ctx, "billing-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if evs := first.Events(); len(evs) != 1 || evs[0].Type != "Opened" {
		t.Fatalf("a turn from revision 0 read %+v, want the stream's one event", evs)
	}
	other, err := st.TakeTurn(ctx, "billing-b", 0)
	if err != nil {
		t.Fatalf("another stream's turn: %v", err)
	}
	if len(other.Events()) != 0 {
		t.Fatalf("a turn on a stream that does not exist read %d events", len(other.Events()))
	}
	other.End()

	cut, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := st.TakeTurn(cut, "billing-a", 1)
		cancelled <- err
	}()
	waitForLockWaiters(t, st, 1)
	cancel()
	if err := <-cancelled; err == nil {
		t.Fatal("a wait for a turn cut short by its context took the turn")
	}

	got := awaitTurn(t, ctx, st, "billing-a", 1, "the first writer")
	if _, err := first.AppendMulti(ctx, eventstore.StreamAppend{Stream: "billing-a", Expected: eventstore.Exact(0), Events: []eventstore.EventData{event("Charged")}}); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	if evs := next.Events(); len(evs) != 1 || evs[0].Type != "Charged" || evs[0].Revision != 1 {
		t.Fatalf("the next turn read %+v, want the first turn's append", evs)
	}
	next.End()
	waitForLockWaiters(t, st, 0)
	if _, err := first.AppendMulti(ctx, eventstore.StreamAppend{Stream: "billing-a", Expected: eventstore.Exact(1), Events: []eventstore.EventData{event("Late")}}); !errors.Is(err, errTurnEnded) {
		t.Fatalf("an append in a turn that has ended: %v, want it refused", err)
	}
}

// A turn's multi-append is all or nothing as AppendMulti is: a part the stream refuses fails it
// with the stream's error, nothing is written, and the turn is over.
func TestTurnAppendRefusedWritesNothing(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	if _, err := st.Append(ctx, "billing-a", eventstore.NoStream(), event("Opened"), event("Charged")); err != nil {
		t.Fatal(err)
	}
	turn, err := st.TakeTurn(ctx, "billing-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = turn.AppendMulti(ctx,
		eventstore.StreamAppend{Stream: "execution-1", Expected: eventstore.NoStream(), Events: []eventstore.EventData{event("Submitted")}},
		eventstore.StreamAppend{Stream: "billing-a", Expected: eventstore.Exact(0), Events: []eventstore.EventData{event("Charged")}})
	var wrong *eventstore.WrongExpectedVersionError
	if !errors.As(err, &wrong) || wrong.Stream != "billing-a" {
		t.Fatalf("a turn's append at a stale revision: %v, want the account's wrong expected version", err)
	}
	if _, err := st.ReadStream(ctx, "execution-1", 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("the refused multi-append's other part: %v, want nothing written", err)
	}
	again, err := st.TakeTurn(ctx, "billing-a", 2)
	if err != nil {
		t.Fatalf("a turn after a refused append: %v", err)
	}
	again.End()
	waitForLockWaiters(t, st, 0)
}

// Turns hold at most a quarter of the pool's connections: past that a writer waits for one to
// end rather than take the connections every holder needs for its appends.
func TestTurnsLeaveConnectionsForAppends(t *testing.T) {
	pool, _ := newMigratedDB(t, 8) // two connections for turns
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	first, err := st.TakeTurn(ctx, "billing-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := st.TakeTurn(ctx, "billing-b", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Appends outside turns still find connections.
	if _, err := st.Append(ctx, "billing-c", eventstore.NoStream(), event("Charged")); err != nil {
		t.Fatalf("append while turns are held: %v", err)
	}
	// A third writer waits for a slot, not for a connection: here until its context ends.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := st.TakeTurn(cancelled, "billing-c", 0); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "every connection for turns is taken") {
		t.Fatalf("a third turn with two held on a pool of eight: %v, want a wait for a slot", err)
	}
	first.End()
	third, err := st.TakeTurn(ctx, "billing-c", 0)
	if err != nil {
		t.Fatalf("a turn once a slot is free: %v", err)
	}
	third.End()
	second.End()
}

// waitForLockWaiters waits until n sessions wait for a stream's turn.
// awaitTurn asks for a turn on stream in a goroutine and checks that it waits (held says
// what holds it); the turn comes on the channel once had (nil if taking it failed).
func awaitTurn(t *testing.T, ctx context.Context, st *Store, stream string, from uint64, held string) <-chan eventstore.Turn {
	t.Helper()
	got := make(chan eventstore.Turn, 1)
	go func() {
		next, err := st.TakeTurn(ctx, stream, from)
		if err != nil {
			t.Error(err)
		}
		got <- next
	}()
	waitForLockWaiters(t, st, 1)
	select {
	case <-got:
		t.Fatalf("a writer took the turn on %s that %s holds", stream, held)
	default:
	}
	return got
}

func waitForLockWaiters(t *testing.T, st *Store, n int) {
	t.Helper()
	pollUntil(t, "turn waiters", func() bool {
		var waiting int
		err := st.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND classid = $1 AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
			streamLockClass).Scan(&waiting)
		return err == nil && waiting == n
	})
}

// A turn on several streams holds each stream's lock and reads each on: a writer wanting any
// of them waits until its append has committed, and then reads it; two such turns on
// overlapping streams, asked for in opposite orders, never wait for each other in a cycle.
func TestTakeTurns(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	for _, s := range []string{"billing-a", "billing-b"} {
		if _, err := st.Append(ctx, s, eventstore.NoStream(), event("Opened")); err != nil {
			t.Fatal(err)
		}
	}
	both, err := st.TakeTurns(ctx, map[string]uint64{"billing-b": 0, "billing-a": 1, "billing-c": 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(both.End) // a failed check must not leave the pool waiting for its connection
	if evs := both.EventsOf("billing-b"); len(evs) != 1 || evs[0].Type != "Opened" {
		t.Fatalf("billing-b from revision 0 read %+v, want its one event", evs)
	}
	if n := len(both.EventsOf("billing-a")) + len(both.EventsOf("billing-c")) + len(both.EventsOf("billing-d")); n != 0 {
		t.Fatalf("read %d events past billing-a's revision, of billing-c that does not exist and billing-d the turn is not on", n)
	}

	got := awaitTurn(t, ctx, st, "billing-a", 1, "a turn on several streams")
	if _, err := both.AppendMulti(ctx,
		eventstore.StreamAppend{Stream: "billing-a", Expected: eventstore.Exact(0), Events: []eventstore.EventData{event("Charged")}},
		eventstore.StreamAppend{Stream: "billing-b", Expected: eventstore.Exact(0), Events: []eventstore.EventData{event("Charged")}}); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	t.Cleanup(next.End)
	if evs := next.Events(); len(evs) != 1 || evs[0].Type != "Charged" {
		t.Fatalf("the next turn read %+v, want the append of the turn on several streams", evs)
	}
	next.End()

	// A stream longer than a page is read on to its end.
	long := make([]eventstore.EventData, turnReadPage+1)
	for i := range long {
		long[i] = event("Charged")
	}
	if _, err := st.Append(ctx, "billing-long", eventstore.NoStream(), long...); err != nil {
		t.Fatal(err)
	}
	paged, err := st.TakeTurns(ctx, map[string]uint64{"billing-long": 0, "billing-a": 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(paged.End)
	if got, a := paged.EventsOf("billing-long"), paged.EventsOf("billing-a"); len(got) != turnReadPage+1 || got[turnReadPage].Revision != turnReadPage || len(a) != 2 {
		t.Fatalf("read %d events of a stream of %d and %d of billing-a, want all and 2", len(got), turnReadPage+1, len(a))
	}
	paged.End()

	// Opposite orders of asking: each turn takes its locks in one order, so both are had.
	done := make(chan error, 2)
	for _, from := range []map[string]uint64{{"billing-a": 2, "billing-b": 2}, {"billing-b": 2, "billing-a": 2}} {
		go func() {
			for range 20 {
				tt, err := st.TakeTurns(ctx, from)
				if err != nil {
					done <- err
					return
				}
				tt.End()
			}
			done <- nil
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
