package postgres

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/storetest"
	"github.com/switchyard/switchyard/internal/testdb"
)

const testTimeout = 30 * time.Second

// newPool opens a pool on dsn with room for maxConns concurrent appenders.
func newPool(t testing.TB, dsn string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", dsn, err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newMigratedDB creates a database, migrates it and returns a pool on it.
func newMigratedDB(t testing.TB, maxConns int32) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := testdb.New(t)
	pool := newPool(t, dsn, maxConns)
	if err := Migrate(context.Background(), pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool, dsn
}

func newStore(t testing.TB, pool *pgxpool.Pool, opts Config) *Store {
	t.Helper()
	st, err := New(context.Background(), pool, opts)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eventstore.Store {
		pool, _ := newMigratedDB(t, 16)
		return newStore(t, pool, Config{})
	})
}

func event(typ string) eventstore.EventData {
	return eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte(`{"k": "v"}`)}
}

func receive(t *testing.T, sub eventstore.Subscription, n int) []eventstore.RecordedEvent {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	var out []eventstore.RecordedEvent
	for len(out) < n {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended after %d of %d events: %v", len(out), n, sub.Err())
			}
			out = append(out, ev)
		case <-deadline.C:
			t.Fatalf("received %d of %d events before the deadline", len(out), n)
		}
	}
	return out
}

// waitUntil waits on b until cond holds. b is signalled whenever cond may have changed.
func waitUntil(t *testing.T, b *broadcaster, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		ch := b.wait()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("wait for %s: not reached after %s", what, testTimeout)
		}
	}
}

// appendInTx calls eventstore_append in tx, as Append does outside a transaction.
func appendInTx(t *testing.T, ctx context.Context, tx pgx.Tx, stream string, ev eventstore.EventData) eventstore.Position {
	t.Helper()
	var (
		rev    int64
		commit uint64
		pos    int64
	)
	err := tx.QueryRow(ctx, appendSQL, stream, kindAny, 0, [][16]byte{ev.ID}, []string{ev.Type}, [][]byte{ev.Data}, [][]byte{nil}).Scan(&rev, &commit, &pos)
	if err != nil {
		t.Fatalf("eventstore_append in a transaction: %v", err)
	}
	return eventstore.Position{Commit: commit, Prepare: uint64(pos)}
}

// TestLateCommitIsNotSkipped is the reason for the visibility rule: a transaction that took its
// id (and here even its position) before another one, but commits after it, must still be
// delivered, and before the other, rather than skipped by a subscriber that moved past it.
func TestLateCommitIsNotSkipped(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{PollInterval: 20 * time.Millisecond})
	ctx := testCtx(t)
	sub, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Close()

	// The late transaction takes its transaction id first (after the append lock, as every
	// appending transaction must)...
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, appendLockSQL, 3); err != nil {
		t.Fatalf("append lock: %v", err)
	}
	var lateTx uint64
	if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()").Scan(&lateTx); err != nil {
		t.Fatalf("take a transaction id: %v", err)
	}
	// ...another append commits meanwhile...
	early := event("Early")
	earlyRes, err := st.Append(ctx, "early-1", eventstore.NoStream(), early)
	if err != nil {
		t.Fatalf("append early: %v", err)
	}
	// ...and the late transaction appends, getting a higher position, but stays open.
	late := event("Late")
	latePos := appendInTx(t, ctx, tx, "late-1", late)
	if latePos.Commit != lateTx || !(latePos.Commit < earlyRes.Position.Commit) || !(latePos.Prepare > earlyRes.Position.Prepare) {
		t.Fatalf("setup: late event at %s, early at %s; want a lower transaction id and a higher position", latePos, earlyRes.Position)
	}

	// The early event is committed, yet invisible to the log while the late transaction runs:
	// delivering it now would put the late event behind a subscriber that has moved past it.
	reads := st.subscriptionReads.Load()
	got, err := st.ReadAll(ctx, eventstore.Start, 10, eventstore.Filter{})
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadAll while an older transaction is open = %d events, %v; want none", len(got), err)
	}
	if head, err := st.HeadPosition(ctx); err != nil || !head.IsStart() {
		t.Fatalf("HeadPosition while an older transaction is open = %s, %v; want Start", head, err)
	}
	// Let the subscription read the log twice more (the append woke it, and it polls): each
	// read started after the early commit, and delivered nothing.
	waitFor(t, func() bool { return st.subscriptionReads.Load() >= reads+2 })
	select {
	case ev := <-sub.Events():
		t.Fatalf("subscription delivered %s (%s) while an older transaction was open", ev.ID, ev.Type)
	default:
	}
	// Events of the open transaction are still readable by stream (nothing is hidden from
	// aggregates: only committed data is read, and the early stream is committed).
	if evs, err := st.ReadStream(ctx, "early-1", 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("ReadStream of the committed stream = %d events, %v", len(evs), err)
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit late: %v", err)
	}
	evs := receive(t, sub, 2)
	if evs[0].ID != late.ID || evs[1].ID != early.ID {
		t.Fatalf("delivered %s then %s, want late %s then early %s", evs[0].Type, evs[1].Type, late.ID, early.ID)
	}
	if evs[0].Position != latePos || evs[1].Position != earlyRes.Position || !evs[0].Position.Less(evs[1].Position) {
		t.Fatalf("positions %s, %s; want %s < %s", evs[0].Position, evs[1].Position, latePos, earlyRes.Position)
	}
	all, err := st.ReadAll(ctx, eventstore.Start, 10, eventstore.Filter{})
	if err != nil || len(all) != 2 || all[0].ID != late.ID || all[1].ID != early.ID {
		t.Fatalf("ReadAll after the commit = %v, %v; want late then early", all, err)
	}
}

// waitFor polls cond: used only for counters no channel signals.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached after %s", testTimeout)
		}
		<-tick.C
	}
}

// TestNotifyWakesOtherProcess: a Store that never polls (hour-long interval) still delivers
// an event appended through another Store, because the other Store NOTIFYs and this one
// LISTENs; and it keeps doing so after its LISTEN connection is killed.
func TestNotifyWakesOtherProcess(t *testing.T) {
	pool, dsn := newMigratedDB(t, 8)
	writer := newStore(t, pool, Config{})
	reader := newStore(t, newPool(t, dsn, 4), Config{PollInterval: time.Hour})
	ctx := testCtx(t)
	sub, err := reader.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Close()
	waitUntil(t, &reader.listenUp, "LISTEN", func() bool { return reader.listenConnects.Load() >= 1 })

	ev := event("Notified")
	if _, err := writer.Append(ctx, "notify-1", eventstore.NoStream(), ev); err != nil {
		t.Fatalf("append: %v", err)
	}
	if got := receive(t, sub, 1)[0]; got.ID != ev.ID {
		t.Fatalf("got %s, want %s", got.ID, ev.ID)
	}

	// Kill the LISTEN connection: the listener reconnects and wake-ups resume.
	var killed bool
	if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(reader.listenPID.Load())).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the LISTEN backend: %v, %v", killed, err)
	}
	waitUntil(t, &reader.listenUp, "LISTEN again", func() bool { return reader.listenConnects.Load() >= 2 })
	ev2 := event("NotifiedAgain")
	if _, err := writer.Append(ctx, "notify-1", eventstore.Exact(0), ev2); err != nil {
		t.Fatalf("append: %v", err)
	}
	if got := receive(t, sub, 1)[0]; got.ID != ev2.ID {
		t.Fatalf("got %s, want %s", got.ID, ev2.ID)
	}
}

// TestRevisionOrderGuard: an append whose transaction id is older than that of the stream's
// last writer must not commit, since the log would order its later revision first.
func TestRevisionOrderGuard(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, appendLockSQL, 0); err != nil {
		t.Fatalf("append lock: %v", err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatalf("take a transaction id: %v", err)
	}
	if _, err := st.Append(ctx, "guard-1", eventstore.NoStream(), event("Newer")); err != nil {
		t.Fatalf("append: %v", err)
	}
	var rev int64
	err = tx.QueryRow(ctx, appendSQL, "guard-1", kindAny, 0, [][16]byte{uuid.New()}, []string{"Older"}, [][]byte{[]byte(`{}`)}, [][]byte{nil}).Scan(&rev, new(uint64), new(int64))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != codeRetry {
		t.Fatalf("append from an older transaction: err = %v, want SQLSTATE %s", err, codeRetry)
	}
}

// TestFastPathRevisionOrderGuard: the one-statement append applies the same guard, by writing
// nothing (so that Append falls back to eventstore_append in a new transaction).
func TestFastPathRevisionOrderGuard(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatalf("take a transaction id: %v", err)
	}
	if _, err := st.Append(ctx, "guard-1", eventstore.NoStream(), event("Newer")); err != nil {
		t.Fatalf("append: %v", err)
	}
	for _, c := range []struct {
		sql  string
		cond any
	}{{fastUpsertOneSQL, true}, {fastUpdateOneSQL, int64(-1)}, {fastUpdateOneSQL, int64(0)}} {
		err := tx.QueryRow(ctx, c.sql, "guard-1", c.cond, "guard", [16]byte(uuid.New()), "Older", []byte(`{}`), []byte(nil)).Scan(new(int64), new(uint64), new(int64))
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("fast append from an older transaction: err = %v, want no row", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The Store's own retry goes through: a new transaction is newer.
	res, err := st.Append(ctx, "guard-1", eventstore.Exact(0), event("Later"))
	if err != nil || res.NextRevision != 1 {
		t.Fatalf("append after the guard = %+v, %v; want revision 1", res, err)
	}
}

func TestMigrateConcurrentAndRepeated(t *testing.T) {
	pool := newPool(t, testdb.New(t), 8)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- Migrate(ctx, pool)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatalf("repeated migrate: %v", err)
	}
	st := newStore(t, pool, Config{})
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func TestNewNeedsSchema(t *testing.T) {
	pool := newPool(t, testdb.New(t), 2)
	_, err := New(testCtx(t), pool, Config{})
	if err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("New on an unmigrated database: err = %v, want one naming Migrate", err)
	}
}

func TestAppendRejectsBadEvents(t *testing.T) {
	pool, _ := newMigratedDB(t, 4)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	bad := []eventstore.EventData{
		{ID: uuid.New(), Type: "", Data: []byte(`{}`)},
		{ID: uuid.New(), Type: "T", Data: []byte(`{not json`)},
		{ID: uuid.New(), Type: "T", Data: nil},
		{ID: uuid.New(), Type: "T", Data: []byte(`{}`), Metadata: []byte(`nope`)},
	}
	for i, ev := range bad {
		if _, err := st.Append(ctx, "bad-1", eventstore.Any(), event("Good"), ev); err == nil {
			t.Errorf("bad event %d: append succeeded", i)
		}
	}
	if _, err := st.Append(ctx, "", eventstore.Any(), event("Good")); err == nil {
		t.Errorf("append to an empty stream name succeeded")
	}
	if _, err := st.ReadStream(ctx, "bad-1", 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("rejected appends wrote: ReadStream err = %v", err)
	}
}

// Data the service's readers could not take back (a NUL character, a number beyond numeric),
// refused by Config.CheckPayload as the service sets it, is eventstore.ErrUnstorable on every
// append path, single or multi, in a turn or not, and writes nothing; a multi-append's other
// parts then go through alone.
func TestUnstorableDataIsErrUnstorable(t *testing.T) {
	pool, _ := newMigratedDB(t, 4)
	st := newStore(t, pool, Config{CheckPayload: func(raw []byte) error { return domain.CheckStorableData("payload", raw) }})
	ctx := testCtx(t)
	for _, data := range []string{`{"a":"\u0000"}`, `{"a":1e131072}`} {
		bad := eventstore.EventData{ID: uuid.New(), Type: "T", Data: []byte(data)}
		if _, err := st.Append(ctx, "poison-1", eventstore.Any(), bad); !errors.Is(err, eventstore.ErrUnstorable) {
			t.Fatalf("Append of %s: %v, want ErrUnstorable", data, err)
		}
		multi := []eventstore.StreamAppend{{Stream: "fine-1", Expected: eventstore.Any(), Events: []eventstore.EventData{event("Good")}},
			{Stream: "poison-1", Expected: eventstore.Any(), Events: []eventstore.EventData{bad}}}
		if _, err := st.AppendMulti(ctx, multi...); !errors.Is(err, eventstore.ErrUnstorable) {
			t.Fatalf("AppendMulti with %s: %v, want ErrUnstorable", data, err)
		}
		turn, err := st.TakeTurn(ctx, "fine-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := turn.AppendMulti(ctx, multi...); !errors.Is(err, eventstore.ErrUnstorable) {
			t.Fatalf("a turn's AppendMulti with %s: %v, want ErrUnstorable", data, err)
		}
		turn.End()
	}
	for _, stream := range []string{"fine-1", "poison-1"} {
		if _, err := st.ReadStream(ctx, stream, 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
			t.Fatalf("refused appends wrote %s: %v", stream, err)
		}
	}
	if _, err := st.AppendMulti(ctx, eventstore.StreamAppend{Stream: "fine-1", Expected: eventstore.NoStream(),
		Events: []eventstore.EventData{event("Good")}}); err != nil {
		t.Fatalf("the good part alone: %v", err)
	}
	// Other failures keep their own errors.
	if _, err := st.Append(ctx, "fine-1", eventstore.NoStream(), event("Good")); errors.Is(err, eventstore.ErrUnstorable) ||
		!errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Fatalf("a wrong expectation: %v", err)
	}
}

// TestFilteredScanHorizon: a read whose filter matches nothing still reports how far it has
// scanned, so a sparse subscription does not rescan the log on every wake-up.
func TestFilteredScanHorizon(t *testing.T) {
	pool, _ := newMigratedDB(t, 4)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	appended, err := st.Append(ctx, "busy-1", eventstore.NoStream(), event("A"), event("A"))
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	var horizon eventstore.Position
	waitFor(t, func() bool {
		res, err := st.readLog(ctx, eventstore.Start, 10, eventstore.Filter{Categories: []string{"quiet"}})
		if err != nil || len(res.events) != 0 {
			t.Fatalf("readLog = %d events, %v; want none", len(res.events), err)
		}
		horizon = res.scanned
		return appended.Position.Less(horizon)
	})
	if horizon.Commit >= 1<<62 {
		t.Fatalf("implausible horizon %s", horizon)
	}
}

// A subscription whose filter matches nothing tells how far it has read (eventstore.Progress),
// both catching up and fed by the tail; subscribing again from there delivers the next match
// and nothing before it.
func TestSubscriptionTellsHowFarItHasRead(t *testing.T) {
	pool, _ := newMigratedDB(t, 4)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	quiet := eventstore.Filter{Types: []string{"Quiet"}}
	stored, err := st.Append(ctx, "busy-1", eventstore.NoStream(), event("A"), event("A"))
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	sub, err := st.Subscribe(ctx, eventstore.Start, quiet)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Close()
	prog, ok := sub.(eventstore.Progress)
	if !ok {
		t.Fatalf("%T does not tell how far it has read", sub)
	}
	waitFor(t, func() bool { return !prog.Scanned().Less(stored.Position) }) // caught up
	live, err := st.Append(ctx, "busy-2", eventstore.NoStream(), event("B"))
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	waitFor(t, func() bool { return !prog.Scanned().Less(live.Position) }) // from the tail
	if n := len(sub.Events()); n != 0 {
		t.Fatalf("%d events delivered for a filter that matches none", n)
	}
	again, err := st.Subscribe(ctx, prog.Scanned(), eventstore.Filter{})
	if err != nil {
		t.Fatalf("subscribe again: %v", err)
	}
	defer again.Close()
	next, err := st.Append(ctx, "busy-3", eventstore.NoStream(), event("C"))
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if got := receive(t, again, 1); got[0].Position != next.Position {
		t.Fatalf("subscribed from the scanned position, got %s first, want %s", got[0].Position, next.Position)
	}
}
