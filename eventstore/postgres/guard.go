package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/eventstore"
)

var _ eventstore.GuardedAppends = (*Store)(nil)

// expectSinceSQL checks an AppendGuarded's guard (eventstore_expect_since in schema.go).
const expectSinceSQL = `SELECT eventstore_expect_since($1, $2::bigint, $3::text[], $4::bigint, $5, $6, $7::numeric)`

// readOthersSQL reads what others appended to the guarded stream from the guard's revision on:
// the events of every transaction but this one.
const readOthersSQL = `SELECT ` + eventColumns + ` FROM events
WHERE stream = $1 AND revision >= $2 AND tx_id <> pg_current_xact_id() ORDER BY revision`

// AppendGuarded implements eventstore.GuardedAppends. Where a turn (TakeTurn) holds the
// stream's lock over two round trips (waiting for it and reading the stream on; then the
// append and the commit), with the writer's decision between them, this sends it all in one:
// begin, the turn's lock, the appends, the guard, the read of what others appended, the check
// that every event was written, and the commit. The lock is held only while the server runs
// them, and the writers of a hot stream follow each other at the pace of its commits.
func (s *Store) AppendGuarded(ctx context.Context, g eventstore.Guard, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, []eventstore.RecordedEvent, error) {
	if s.closed.Load() {
		return nil, nil, eventstore.ErrClosed
	}
	if g.From > maxInt64 {
		return nil, nil, fmt.Errorf("eventstore/postgres: guarded append to %s: revision %d out of range", g.Stream, g.From)
	}
	guarded := false
	for _, a := range appends {
		if a.Stream == g.Stream {
			if !a.Expected.IsAny() {
				return nil, nil, fmt.Errorf("eventstore/postgres: guarded append to %s: its part must expect any revision", g.Stream)
			}
			guarded = true
		}
	}
	if !guarded {
		return nil, nil, fmt.Errorf("eventstore/postgres: guarded append: no part appends to %s", g.Stream)
	}
	parts, err := encodeParts(appends)
	if err != nil {
		return nil, nil, unstorable(err)
	}
	claims, err := collectClaims(appends)
	if err != nil {
		return nil, nil, err
	}
	select {
	case s.streamLocks <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("eventstore/postgres: guarded append to %s: every connection for turns is taken: %w", g.Stream, ctx.Err())
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		<-s.streamLocks
		return nil, nil, fmt.Errorf("eventstore/postgres: guarded append to %s: %w", g.Stream, err)
	}
	t := &turn{s: s, conn: c}
	defer s.appended()
	step := &guardStep{guard: g}
	res, ok, err := s.multiFast(ctx, c, parts, claims, true, step)
	if ok {
		t.end(false)
		return res, step.seen, nil
	}
	// Failed or declined: the transaction is aborted, or open when a part declined.
	t.End()
	var pgErr *pgconn.PgError
	switch {
	case err == nil, errors.As(err, &pgErr) && pgErr.Code == codeGuard:
		return nil, nil, fmt.Errorf("eventstore/postgres: append to %s: %w", g.Stream, eventstore.ErrGuardRefused)
	case ctx.Err() != nil:
		return nil, nil, err
	}
	if _, ok := claimedError(err); ok {
		return nil, nil, err
	}
	// Anything else the fast path cannot settle (an event id stored already, say): the caller
	// decides again, as the slow path of an AppendMulti would.
	return nil, nil, fmt.Errorf("eventstore/postgres: append to %s: %w: %w", g.Stream, eventstore.ErrGuardRefused, err)
}

// maxInt64 is the largest revision the guard's bigint holds.
const maxInt64 = 1<<63 - 1

// guardStep is an AppendGuarded's part of multiFast's batch; nil for a plain one.
type guardStep struct {
	guard eventstore.Guard
	seen  []eventstore.RecordedEvent
}

// queueBegin queues the statements before the appends: begin, and wait for the stream's turn.
func (g *guardStep) queueBegin(b *pgx.Batch) {
	if g == nil {
		return
	}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT pg_advisory_xact_lock($1::int, $2::int)`, streamLockClass, streamLockKey(g.guard.Stream))
}

// queueCheck queues the statements after the appends: the guard, and the read of the others'
// events.
func (g *guardStep) queueCheck(b *pgx.Batch) {
	if g == nil {
		return
	}
	gd := g.guard
	b.Queue(expectSinceSQL, gd.Stream, int64(gd.From), gd.Types, int64(gd.MaxEvents), gd.SumType, gd.SumField, gd.SumMax)
	b.Queue(readOthersSQL, gd.Stream, int64(gd.From))
}

func (g *guardStep) readBegin(br pgx.BatchResults) error {
	if g == nil {
		return nil
	}
	return execAll(br, 2)
}

func (g *guardStep) readCheck(br pgx.BatchResults) error {
	if g == nil {
		return nil
	}
	if _, err := br.Exec(); err != nil {
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	g.seen, err = collectEvents(rows, g.guard.MaxEvents)
	return err
}
