package postgres

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/eventstore"
)

// AppendMulti appends to several streams in one transaction: every part is written or none is.
// The usual case is one round trip (the parts' fast statements and a check that every one of
// them wrote, in one implicit transaction); if any part is unusual the transaction is rolled
// back and redone through eventstore_append, which reports the first failing part precisely.
func (s *Store) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	res, err := s.appendMulti(ctx, appends)
	return res, unstorable(err)
}

func (s *Store) appendMulti(ctx context.Context, appends []eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	if s.closed.Load() {
		return nil, eventstore.ErrClosed
	}
	parts, err := s.encodeParts(appends)
	if err != nil || len(parts) == 0 {
		return []eventstore.AppendResult{}, err
	}
	claims, err := collectClaims(appends)
	if err != nil {
		return nil, err
	}
	defer s.appended()
	if len(parts) == 1 {
		// One stream's append, with its claims: it may share a group's commit (group.go).
		if _, fast := fastQuery(parts[0], s.payload); fast {
			if res, ok, err := s.group.append(ctx, parts[0], claims); ok || err != nil {
				return []eventstore.AppendResult{res}, err
			}
		}
	}
	if res, ok, err := s.multiFast(ctx, s.pool, parts, claims, false); ok || err != nil {
		return res, err
	}
	return s.multiSlowRetried(ctx, parts, claims)
}

// TakesClaims implements eventstore.ClaimStore.
func (s *Store) TakesClaims() bool { return true }

// claimSet is the claims of a multi-append, as eventstore_claim's arguments.
type claimSet struct {
	keys, owners [][]byte
	untils       []time.Time
}

// collectClaims gathers the parts' claims, each key once. Two owners of one key in one call
// refuse the call as the store would (the first part's owner holds it).
func collectClaims(appends []eventstore.StreamAppend) (claimSet, error) {
	var c claimSet
	owners := map[string][]byte{}
	for _, a := range appends {
		for _, cl := range a.Claims {
			if held, dup := owners[string(cl.Key)]; dup {
				if !bytes.Equal(held, cl.Owner) {
					return claimSet{}, &eventstore.ClaimedError{Key: cl.Key, Holder: held}
				}
				continue
			}
			owners[string(cl.Key)] = cl.Owner
			c.keys, c.owners, c.untils = append(c.keys, cl.Key), append(c.owners, cl.Owner), append(c.untils, cl.Until)
		}
	}
	return c, nil
}

func (c claimSet) empty() bool { return len(c.keys) == 0 }

// with is c and more, for one statement of a group's claims. A key the two share goes twice:
// the statement then fails, the group is rolled back, and its members go again alone.
func (c claimSet) with(more claimSet) claimSet {
	if more.empty() {
		return c
	}
	return claimSet{keys: append(c.keys, more.keys...), owners: append(c.owners, more.owners...), untils: append(c.untils, more.untils...)}
}

// claimSQL takes a multi-append's claims in its transaction (eventstore_claim in schema.go).
const claimSQL = `SELECT eventstore_claim($1::bytea[], $2::bytea[], $3::timestamptz[], $4::timestamptz)`

func (c claimSet) queue(b *pgx.Batch) {
	if !c.empty() {
		b.Queue(claimSQL, c.keys, c.owners, c.untils, time.Now())
	}
}

// claimedError turns eventstore_claim's SW006 into an *eventstore.ClaimedError; ok is false
// for any other error.
func claimedError(err error) (*eventstore.ClaimedError, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != codeClaimed {
		return nil, false
	}
	key, holder, _ := strings.Cut(pgErr.Detail, ":")
	k, kerr := hex.DecodeString(key)
	h, herr := hex.DecodeString(holder)
	if kerr != nil || herr != nil {
		return nil, false
	}
	return &eventstore.ClaimedError{Key: k, Holder: h}, true
}

// encodeParts encodes every part of a multi-append.
func (s *Store) encodeParts(appends []eventstore.StreamAppend) ([]encoded, error) {
	parts := make([]encoded, len(appends))
	for i, a := range appends {
		e, err := s.encode(a.Stream, a.Expected, a.Events)
		if err != nil {
			return nil, err
		}
		parts[i] = e
	}
	return parts, nil
}

// multiSlowRetried runs multiSlow until it succeeds, fails for good or has been retried
// maxAppendRetries times.
func (s *Store) multiSlowRetried(ctx context.Context, parts []encoded, claims claimSet) ([]eventstore.AppendResult, error) {
	for attempt := 1; ; attempt++ {
		res, retry, err := s.multiSlow(ctx, parts, claims)
		if err == nil {
			return res, nil
		}
		if !retry || attempt >= maxAppendRetries {
			return nil, err
		}
	}
}

// batchSender is what multiFast sends its batch through: the pool, or a turn's connection.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// multiFast runs every part's fast statement, parts on distinct streams sharing batched
// statements (batch.go), in one pipelined batch, as a group commit does. A declined part writes
// nothing but would not fail its statement, so the batch ends with eventstore_expect_written:
// unless every event was written it raises, and the server rolls the whole transaction back
// before anything commits. The commit thus costs no round trip of its own, which matters most
// while the caller holds a hot stream's lock (turn.go). Through the pool the batch is one
// implicit transaction; with commit, it ends the transaction the caller began on via, and a
// failed batch leaves that transaction for the caller to roll back. ok is false when some part
// was declined (nothing is then written) and the slow path must decide.
func (s *Store) multiFast(ctx context.Context, via batchSender, parts []encoded, claims claimSet, commit bool) ([]eventstore.AppendResult, bool, error) {
	plan := planBatches(parts)
	stmts := make([]fastStatement, len(parts))
	events := 0
	for i, e := range parts {
		if slices.Contains(plan.checks, i) {
			continue
		}
		st, ok := fastQuery(e, s.payload)
		if !ok {
			return nil, false, nil
		}
		stmts[i] = st
		events += len(e.ids)
	}
	res := make([]eventstore.AppendResult, len(parts))
	written := make([]bool, len(parts))
	b := &pgx.Batch{}
	s.queueAppendLock(b)
	queueBatches(b, parts, plan, s.payload)
	for _, i := range plan.rest {
		b.Queue(stmts[i].sql, stmts[i].args...)
	}
	checked := queueChecks(b, parts, plan.checks, res)
	claims.queue(b)
	b.Queue(expectWrittenSQL, int64(events))
	if commit {
		b.Queue(`COMMIT`)
	}
	br := via.SendBatch(ctx, b)
	err := readGroup(br, parts, plan, res, written)
	if err == nil && checked {
		_, err = br.Exec()
	}
	if err == nil && !claims.empty() {
		_, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil && commit {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil:
		// eventstore_expect_written found every event written, so every part wrote, and
		// eventstore_expect_at found every part without events at its revision (other parts
		// without events never come here: fastQuery leaves them to the slow path).
		return res, true, nil
	case multiDeclined(err), rolledBack(err):
		return nil, false, nil
	}
	if ce, ok := claimedError(err); ok {
		return nil, false, ce
	}
	switch {
	default:
		return nil, false, fmt.Errorf("eventstore/postgres: append multi: %w", err)
	}
}

// expectWrittenSQL ends multiFast's batch (eventstore_expect_written in schema.go).
const expectWrittenSQL = `SELECT eventstore_expect_written($1::bigint)`

// expectAtSQL checks multiFast's parts without events (eventstore_expect_at in schema.go).
const expectAtSQL = `SELECT eventstore_expect_at($1::text[], $2::bigint[])`

// queueChecks queues the check of the parts at idx, which have no events and expect an exact
// revision, and gives each its result: the revision it found (a check reports no position).
// false when there are none.
func queueChecks(b *pgx.Batch, parts []encoded, idx []int, res []eventstore.AppendResult) bool {
	if len(idx) == 0 {
		return false
	}
	streams, revs := make([]string, len(idx)), make([]int64, len(idx))
	for k, i := range idx {
		rev, _ := parts[i].expected.ExactRevision()
		streams[k], revs[k] = parts[i].stream, int64(rev)
		res[i] = eventstore.AppendResult{NextRevision: rev}
	}
	b.Queue(expectAtSQL, streams, revs)
	return true
}

// rolledBack reports whether err is PostgreSQL rolling the transaction back to break a
// deadlock or a serialization conflict: nothing of it was written, and the slow path, in a
// transaction of its own, decides as for a declined part. (A charge round carries several
// workspaces' batches; such an error would otherwise fail them all.)
func rolledBack(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// multiDeclined reports whether err says a part of multiFast's batch was declined, so nothing
// was written: by eventstore_expect_written, or by an event id stored already.
func multiDeclined(err error) bool {
	var pgErr *pgconn.PgError
	return fastDeclined(err) || (errors.As(err, &pgErr) && pgErr.Code == codeMultiDeclined)
}

// multiSlow runs every part through eventstore_append in one transaction; the first failing
// part rolls it back and names the error.
func (s *Store) multiSlow(ctx context.Context, parts []encoded, claims claimSet) (_ []eventstore.AppendResult, retry bool, _ error) {
	res := make([]eventstore.AppendResult, len(parts))
	n := len(parts)
	if !claims.empty() {
		n++
	}
	_, err := s.multiTx(ctx, n, func(b *pgx.Batch) {
		for _, e := range parts {
			kind, rev := encodeExpected(e.expected)
			b.Queue(appendSQL, e.stream, kind, rev, e.ids, e.types, e.data, e.meta)
		}
		claims.queue(b)
	}, func(i int, row pgx.Row) (bool, error) {
		if i == len(parts) { // the claims, after every part has been written
			if err := row.Scan(nil); err != nil {
				if ce, ok := claimedError(err); ok {
					return false, ce
				}
				return false, fmt.Errorf("eventstore/postgres: append multi: claims: %w", err)
			}
			return true, nil
		}
		r, err := scanSlow(row)
		if err != nil {
			retry, err = appendError(parts[i], err)
			return false, err
		}
		res[i] = r
		return true, nil
	})
	if err != nil {
		return nil, retry, err
	}
	return res, false, nil
}

// multiTx runs, in one transaction holding the append lock, the n statements fill queues, and
// hands each row to scan. It commits only if every scan reports ok; otherwise it rolls back
// and returns scan's error (nil when a statement merely declined).
func (s *Store) multiTx(ctx context.Context, n int, fill func(*pgx.Batch), scan func(int, pgx.Row) (bool, error)) (bool, error) {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	s.queueAppendLock(b)
	fill(b)
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := execAll(br, 2); err != nil {
		br.Close()
		return false, fmt.Errorf("eventstore/postgres: append multi: begin: %w", err)
	}
	for i := range n {
		if ok, err := scan(i, br.QueryRow()); err != nil || !ok {
			br.Close()
			return false, err
		}
	}
	if err := br.Close(); err != nil {
		return false, fmt.Errorf("eventstore/postgres: append multi: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("eventstore/postgres: append multi: commit: %w", err)
	}
	return true, nil
}

// execAll reads the results of the next n statements of br, which return nothing of interest.
func execAll(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// queueAppendLock queues the append lock (appendLockSQL), which must come before anything
// else a transaction that appends writes.
func (s *Store) queueAppendLock(b *pgx.Batch) {
	b.Queue(appendLockSQL, int32(s.lockSlots.Add(1)%appendLockSlots))
}
