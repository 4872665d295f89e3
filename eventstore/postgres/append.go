package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/eventstore"
)

// Expected-revision kinds as eventstore_append takes them.
const (
	kindAny          = 0
	kindNoStream     = 1
	kindStreamExists = 2
	kindExact        = 3
)

func encodeExpected(e eventstore.ExpectedRevision) (kind int32, rev int64) {
	switch {
	case e.IsNoStream():
		return kindNoStream, 0
	case e.IsStreamExists():
		return kindStreamExists, 0
	}
	if r, ok := e.ExactRevision(); ok {
		if r > math.MaxInt64 {
			// No stream can reach this revision; -2 never equals an actual revision (-1 is
			// "no stream"), so the append fails with the actual revision as it should.
			return kindExact, -2
		}
		return kindExact, int64(r)
	}
	return kindAny, 0
}

// appendSQL calls eventstore_append, the complete append: every expectation, idempotent
// repeats, conflicts, with precise errors. It is the slow path (see fastAppendSQL).
const appendSQL = `SELECT o_revision, o_commit, o_position FROM eventstore_append($1, $2, $3, $4, $5, $6, $7)`

// The fast path: one plain SQL statement (no PL/pgSQL, whose per-statement overhead made the
// function cost half again as much server CPU) for the appends that matter for throughput:
// the expectation holds and the ids are new. It either appends, exactly as eventstore_append
// would, or changes nothing and returns no row (the expectation does not hold, the stream
// does not exist for StreamExists/Exact, the revision-order guard trips) or fails on
// events_event_id_key (an id is stored: maybe a repeat). In those cases Append runs
// eventstore_append, which sorts out the outcome under the stream lock, in a second round trip
// that only unusual appends pay.
//
// Two forms lock (or create) the stream row:
//   - upsert, for Any and NoStream: creates the row for a new stream; for an existing one,
//     $2 (true for Any) says whether to go on. The row lock taken by ON CONFLICT serializes
//     appends to the stream as eventstore_append's SELECT ... FOR UPDATE does.
//   - update, for StreamExists ($2 = -1) and Exact ($2 = the revision).
//
// Both check the revision-order guard of eventstore_append: the appending transaction's id
// must not be older than the stream's last writer's.
const (
	fastUpsertCTE = `WITH s AS (
    INSERT INTO streams AS st (name, revision, tx_id)
    VALUES ($1, %[1]s - 1, pg_current_xact_id())
    ON CONFLICT (name) DO UPDATE SET revision = st.revision + %[1]s, tx_id = excluded.tx_id
    WHERE $2::boolean AND st.tx_id <= excluded.tx_id
    RETURNING st.revision - %[1]s AS base, st.tx_id AS tx
)`
	fastUpdateCTE = `WITH s AS (
    UPDATE streams SET revision = revision + %[1]s, tx_id = pg_current_xact_id()
    WHERE name = $1 AND tx_id <= pg_current_xact_id() AND ($2::bigint < 0 OR revision = $2::bigint)
    RETURNING revision - %[1]s AS base, tx_id AS tx
)`
	// One event: scalar parameters, no unnest (the common case, and measurably cheaper).
	fastInsertOne = `
INSERT INTO events (stream, revision, event_id, type, category, data, metadata, tx_id)
SELECT $1, s.base + 1, $4, $5, $3, $6, $7, s.tx FROM s
RETURNING revision, tx_id, position`
	fastInsertMany = `, ins AS (
    INSERT INTO events (stream, revision, event_id, type, category, data, metadata, tx_id)
    SELECT $1, s.base + u.ord, u.id, u.typ, $3, u.dat, u.meta, s.tx
    FROM s, unnest($4::uuid[], $5::text[], $6::{payload}[], $7::{payload}[]) WITH ORDINALITY AS u(id, typ, dat, meta, ord)
    ORDER BY u.ord
    RETURNING position
)
SELECT s.base + cardinality($4::uuid[]), s.tx, (SELECT max(position) FROM ins) FROM s`
)

var (
	fastUpsertOneSQL  = fmt.Sprintf(fastUpsertCTE, "1") + fastInsertOne
	fastUpdateOneSQL  = fmt.Sprintf(fastUpdateCTE, "1") + fastInsertOne
	fastUpsertManySQL = forPayloads(fmt.Sprintf(fastUpsertCTE, "cardinality($4::uuid[])") + fastInsertMany)
	fastUpdateManySQL = forPayloads(fmt.Sprintf(fastUpdateCTE, "cardinality($4::uuid[])") + fastInsertMany)
)

// maxAppendRetries bounds retries of codeRetry, which needs two appenders to race within
// microseconds for the same stream; several in a row would mean something else is wrong.
const maxAppendRetries = 10

// encoded is one stream's append as query parameters.
type encoded struct {
	stream   string
	expected eventstore.ExpectedRevision
	ids      [][16]byte
	types    []string
	data     [][]byte
	meta     [][]byte
}

// encode checks and converts an append's events. Checked here so a bad event gets an error
// naming it, rather than a parse error about the whole array.
func (s *Store) encode(stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData) (encoded, error) {
	if stream == "" {
		return encoded{}, errors.New("eventstore/postgres: append: empty stream name")
	}
	e := encoded{
		stream:   stream,
		expected: expected,
		ids:      make([][16]byte, len(events)),
		types:    make([]string, len(events)),
		data:     make([][]byte, len(events)),
		meta:     make([][]byte, len(events)),
	}
	for i, ev := range events {
		if ev.Type == "" {
			return encoded{}, fmt.Errorf("eventstore/postgres: append to %s: event %d (%s): empty type", stream, i, ev.ID)
		}
		if err := s.storable(ev.Data); err != nil {
			return encoded{}, fmt.Errorf("eventstore/postgres: append to %s: event %d (%s, %s): data: %w", stream, i, ev.ID, ev.Type, err)
		}
		if len(ev.Metadata) > 0 {
			if err := s.storable(ev.Metadata); err != nil {
				return encoded{}, fmt.Errorf("eventstore/postgres: append to %s: event %d (%s, %s): metadata: %w", stream, i, ev.ID, ev.Type, err)
			}
		}
		e.ids[i] = [16]byte(ev.ID)
		e.types[i] = ev.Type
		e.data[i] = ev.Data
		if len(ev.Metadata) > 0 {
			e.meta[i] = ev.Metadata
		}
	}
	return e, nil
}

// errNotJSON is an event's data or metadata that is not JSON text.
var errNotJSON = errors.New("not JSON")

// storable refuses what the log cannot keep: text that is not JSON, and what Config.CheckPayload
// refuses (as eventstore.ErrUnstorable).
func (s *Store) storable(raw []byte) error {
	if !json.Valid(raw) {
		return errNotJSON
	}
	if s.opts.CheckPayload != nil {
		if err := s.opts.CheckPayload(raw); err != nil {
			return fmt.Errorf("%w: %w", err, eventstore.ErrUnstorable)
		}
	}
	return nil
}

// Append writes events to stream. Concurrent appends share a transaction (group commit, see
// group.go); an append that the one-statement fast path cannot settle takes the slow path, on
// its own.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := s.appendEvents(ctx, stream, expected, events)
	return res, unstorable(err)
}

func (s *Store) appendEvents(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if s.closed.Load() {
		return eventstore.AppendResult{}, eventstore.ErrClosed
	}
	e, err := s.encode(stream, expected, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if len(events) > 0 {
		if _, ok := fastQuery(e, s.payload); ok {
			res, ok, err := s.group.append(ctx, e, claimSet{})
			// Wake subscribers whatever the outcome: a failed append also held a transaction
			// id that may have kept other appends from being visible.
			s.appended()
			if ok || err != nil {
				return res, err
			}
		}
	}
	return s.appendSlow(ctx, e)
}

// appendSlow appends through eventstore_append, which settles every case under the stream lock.
func (s *Store) appendSlow(ctx context.Context, e encoded) (eventstore.AppendResult, error) {
	kind, rev := encodeExpected(e.expected)
	for attempt := 1; ; attempt++ {
		row := s.pool.QueryRow(ctx, appendSQL, e.stream, kind, rev, e.ids, e.types, e.data, e.meta)
		res, err := scanSlow(row)
		s.appended()
		if err == nil {
			return res, nil
		}
		retry, err := appendError(e, err)
		if retry && attempt < maxAppendRetries {
			continue
		}
		return eventstore.AppendResult{}, err
	}
}

// scanSlow reads eventstore_append's row.
func scanSlow(row pgx.Row) (eventstore.AppendResult, error) {
	var (
		nextRev  int64
		commit   *uint64
		position *int64
	)
	if err := row.Scan(&nextRev, &commit, &position); err != nil {
		return eventstore.AppendResult{}, err
	}
	res := eventstore.AppendResult{}
	if nextRev >= 0 {
		res.NextRevision = uint64(nextRev)
	}
	if commit != nil && position != nil {
		res.Position = eventstore.Position{Commit: *commit, Prepare: uint64(*position)}
	}
	return res, nil
}

// unstorable marks err with eventstore.ErrUnstorable when PostgreSQL refused the data itself:
// SQLSTATE class 22 (data exception: 22P05 untranslatable character, 22003 numeric value out of
// range, ...) or 54001 (statement too complex: nesting past the stack).
func unstorable(err error) error {
	var pgErr *pgconn.PgError
	if err == nil || errors.Is(err, eventstore.ErrUnstorable) || !errors.As(err, &pgErr) {
		return err
	}
	if strings.HasPrefix(pgErr.Code, "22") || pgErr.Code == "54001" {
		return fmt.Errorf("%w: %w", eventstore.ErrUnstorable, err)
	}
	return err
}

// appendError maps an eventstore_append failure to the store's errors; retry reports a
// failure that a new transaction may not meet (codeRetry).
func appendError(e encoded, err error) (retry bool, _ error) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false, fmt.Errorf("eventstore/postgres: append to %s: %w", e.stream, err)
	}
	switch {
	case pgErr.Code == codeRetry:
		return true, fmt.Errorf("eventstore/postgres: append to %s: %w", e.stream, err)
	case pgErr.Code == codeWrongExpectedVersion:
		actual, perr := strconv.ParseInt(pgErr.Detail, 10, 64)
		if perr != nil {
			return false, fmt.Errorf("eventstore/postgres: append to %s: bad actual revision %q: %w", e.stream, pgErr.Detail, err)
		}
		wev := &eventstore.WrongExpectedVersionError{Stream: e.stream, Expected: e.expected}
		if actual >= 0 {
			wev.Actual, wev.HasActual = uint64(actual), true
		}
		return false, wev
	case pgErr.Code == codeIdempotencyConflict,
		pgErr.Code == "23505" && pgErr.ConstraintName == constraintEventID:
		// 23505: an id is stored in another stream, or two appends carrying the same id
		// raced; either way it is not a repeat of this append.
		return false, fmt.Errorf("eventstore/postgres: append to %s: %w (%s)", e.stream, eventstore.ErrIdempotencyConflict, pgErr.Message)
	}
	return false, fmt.Errorf("eventstore/postgres: append to %s: %w", e.stream, err)
}

// fastStatement is the fast path's SQL and arguments for one append.
type fastStatement struct {
	sql  string
	args []any
}

// fastQuery builds the one-statement append of e to a log whose payloads are p; ok is false
// when only the slow path can say what happens (no events, a revision beyond int64).
func fastQuery(e encoded, p payload) (fastStatement, bool) {
	if len(e.ids) == 0 {
		return fastStatement{}, false
	}
	var (
		sql  string
		cond any
	)
	one := len(e.ids) == 1
	switch {
	case e.expected.IsAny(), e.expected.IsNoStream():
		sql, cond = fastUpsertManySQL[p], e.expected.IsAny()
		if one {
			sql = fastUpsertOneSQL
		}
	default:
		rev, isExact := e.expected.ExactRevision()
		if isExact && rev > math.MaxInt64 {
			return fastStatement{}, false // cannot hold; the slow path says why
		}
		sql, cond = fastUpdateManySQL[p], int64(-1)
		if isExact {
			cond = int64(rev)
		}
		if one {
			sql = fastUpdateOneSQL
		}
	}
	if one {
		return fastStatement{sql, []any{e.stream, cond, eventstore.Category(e.stream), e.ids[0], e.types[0], e.data[0], e.meta[0]}}, true
	}
	return fastStatement{sql, []any{e.stream, cond, eventstore.Category(e.stream), e.ids, e.types, e.data, e.meta}}, true
}

// fastDeclined reports a fast-path outcome that the slow path settles: no row (expectation,
// missing stream, revision-order guard) or an event id already stored (maybe a repeat).
func fastDeclined(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, pgx.ErrNoRows) || (errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraintEventID)
}
