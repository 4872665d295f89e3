package projections

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is the transaction a projector writes through. Writes are queued and sent to Postgres in
// one pipelined batch, so applying a batch of events costs one round trip rather than one per
// statement; a read first flushes the queue so it sees every earlier write.
type Tx struct {
	tx    conn
	queue *pgx.Batch
}

// conn is what a Tx sends through: a pgx.Tx, or a pooled connection whose transaction is
// begun and committed by statements in the queue (Engine.applyAt).
type conn interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func newTx(tx conn) *Tx { return &Tx{tx: tx, queue: &pgx.Batch{}} }

// Exec queues a write.
func (t *Tx) Exec(sql string, args ...any) { t.queue.Queue(sql, args...) }

// QueryRow flushes queued writes, then runs a query returning one row.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.Flush(ctx); err != nil {
		return errRow{err}
	}
	return t.tx.QueryRow(ctx, sql, args...)
}

// Query flushes queued writes, then runs a query.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.Flush(ctx); err != nil {
		return nil, err
	}
	return t.tx.Query(ctx, sql, args...)
}

// ExecNow flushes queued writes, then runs a statement at once and returns its result.
func (t *Tx) ExecNow(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.Flush(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.tx.Exec(ctx, sql, args...)
}

// Flush sends queued writes and reports the first failure.
func (t *Tx) Flush(ctx context.Context) error {
	n := t.queue.Len()
	if n == 0 {
		return nil
	}
	q := t.queue
	t.queue = &pgx.Batch{}
	br := t.tx.SendBatch(ctx, q)
	for i := 0; i < n; i++ {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("projection write %d of %d (%s): %w", i+1, n, q.QueuedQueries[i].SQL, err)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("projection batch: %w", err)
	}
	return nil
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
