package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/eventstore"
)

// TestOtherTransactionsDoNotHoldEventsBack: a transaction of the same database that writes no
// event (a projector's batch, a replay-guard insert) does not hide newer events from
// subscribers, however long it stays open.
func TestOtherTransactionsDoNotHoldEventsBack(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{PollInterval: time.Hour})
	ctx := testCtx(t)
	sub, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE other_work (n int)`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(ctx, `INSERT INTO other_work VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	ev := event("NotHeldBack")
	res, err := st.Append(ctx, "free-1", eventstore.NoStream(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := receive(t, sub, 1)[0]; got.ID != ev.ID {
		t.Fatalf("got %s, want %s", got.ID, ev.ID)
	}
	if head, err := st.HeadPosition(ctx); err != nil || head != res.Position {
		t.Fatalf("head position with another transaction open = %s, %v; want %s", head, err, res.Position)
	}
	if all, err := st.ReadAll(ctx, eventstore.Start, 10, eventstore.Filter{}); err != nil || len(all) != 1 {
		t.Fatalf("ReadAll with another transaction open = %v, %v; want the event", all, err)
	}
}

// TestAppendAfterOwnWritesIsRefused: eventstore_append in a transaction that already has an id
// but not the append lock is refused, since subscribers may already have read past that id.
func TestAppendAfterOwnWritesIsRefused(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	ctx := testCtx(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	err = tx.QueryRow(ctx, appendSQL, "refused-1", kindAny, 0, [][16]byte{uuid.New()}, []string{"Refused"}, [][]byte{[]byte(`{}`)}, [][]byte{nil}).Scan(new(int64), new(uint64), new(int64))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != codeNoAppendLock {
		t.Fatalf("append after writing without the append lock: %v, want SQLSTATE %s", err, codeNoAppendLock)
	}
}
