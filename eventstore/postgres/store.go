// Package postgres is the PostgreSQL backend of the event store (DESIGN.md section 3).
//
// All events live in one table, ordered by (transaction id, position). Readers of the log only
// see rows whose transaction id is below the xmin of their snapshot (ignoring transactions of
// other databases, see horizonSQL): every transaction below it has finished, so no event can
// later appear before one already read. That is how a subscription never skips an event whose
// transaction commits late, without serializing appends: appends to different streams run in
// parallel, appends to one stream are serialized by a row lock on that stream.
//
// A transaction left open in the event store's database holds every subscriber back until it
// ends (subscriptions log a warning after a minute); keep write transactions there short.
//
// The pool given to New belongs to the caller and must allow at least as many connections as
// the number of concurrent appenders (pgxpool defaults to max(4, NumCPU)); subscriptions also
// open one dedicated LISTEN connection per Store, outside the pool.
package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/eventstore"
)

// Defaults of Options.
const (
	DefaultPollInterval   = 250 * time.Millisecond
	DefaultNotifyChannel  = "switchyard_events"
	DefaultNotifyInterval = 5 * time.Millisecond
	DefaultBatchSize      = 1000
	DefaultRetryTimeout   = 30 * time.Second
)

// Options tune a Store. The zero value is usable: every field has a default.
type Options struct {
	// PollInterval is how often a live subscription reads the log without being woken. Wake-ups
	// (local appends, NOTIFY from other processes) make delivery prompt; polling covers what they
	// cannot see: a transaction outside the event store holding the snapshot xmin back, an
	// aborted append, a lost LISTEN connection. Default 250ms.
	PollInterval time.Duration
	// NotifyChannel is the LISTEN/NOTIFY channel shared by every process on the database.
	// Default "switchyard_events".
	NotifyChannel string
	// NotifyInterval is the least time between two NOTIFYs from this Store. NOTIFY takes a
	// cluster-wide lock at commit, so it is sent by a background goroutine, coalesced, and never
	// inside an append. Default 5ms.
	NotifyInterval time.Duration
	// BatchSize is the number of events a subscription reads per query. Default 1000.
	BatchSize int
	// RetryTimeout is how long a subscription retries a failing read (connection lost, server
	// restarting) before it ends with the error. Default 30s.
	RetryTimeout time.Duration
	// Logger receives warnings about retried failures. Default logrus.StandardLogger().
	Logger logrus.FieldLogger
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.NotifyChannel == "" {
		o.NotifyChannel = DefaultNotifyChannel
	}
	if o.NotifyInterval <= 0 {
		o.NotifyInterval = DefaultNotifyInterval
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.RetryTimeout <= 0 {
		o.RetryTimeout = DefaultRetryTimeout
	}
	if o.Logger == nil {
		o.Logger = logrus.StandardLogger()
	}
	return o
}

// Store is the PostgreSQL event store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	opts Options
	log  logrus.FieldLogger
	// instance tags this Store's NOTIFYs so its own listener can ignore them: local
	// subscribers were already woken in-process.
	instance string

	ctx    context.Context // cancelled by Close; parent of every background goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	// life orders Close against Subscribe: wg.Add must not race with wg.Wait.
	life sync.Mutex

	wake       broadcaster   // wakes local subscriptions: appends here, NOTIFYs from elsewhere
	notifyReq  chan struct{} // capacity 1: "there were appends since the last NOTIFY"
	listenOnce sync.Once

	// Listener state, observed by tests.
	listenConnects atomic.Int64 // successful LISTENs so far
	listenPID      atomic.Uint32
	listenUp       broadcaster // signalled after each successful LISTEN
	// subscriptionReads counts log reads whose events subscriptions have been handed, so a
	// test can tell that a read started after some point has completed.
	subscriptionReads atomic.Int64
}

var _ eventstore.Store = (*Store)(nil)

// New returns a Store on pool, whose database must have been migrated (Migrate). The pool stays
// the caller's: Close does not close it.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("eventstore/postgres: new: nil pool")
	}
	opts = opts.withDefaults()
	var ok bool
	if err := pool.QueryRow(ctx, "SELECT to_regprocedure('eventstore_append(text,int,bigint,uuid[],text[],jsonb[],jsonb[])') IS NOT NULL").Scan(&ok); err != nil {
		return nil, fmt.Errorf("eventstore/postgres: new: check schema: %w", err)
	}
	if !ok {
		return nil, errors.New("eventstore/postgres: new: schema missing: run postgres.Migrate (switchyard migrate) first")
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		pool:      pool,
		opts:      opts,
		log:       opts.Logger.WithField("component", "eventstore/postgres"),
		instance:  uuid.NewString(),
		ctx:       sctx,
		cancel:    cancel,
		notifyReq: make(chan struct{}, 1),
	}
	s.wake.init()
	s.listenUp.init()
	s.wg.Add(1)
	go s.notifyLoop()
	return s, nil
}

// Close stops the Store's background work and ends its subscriptions (their Err is
// eventstore.ErrClosed), waiting for their goroutines to exit. It does not close the pool.
// Calling Close again does nothing.
func (s *Store) Close() error {
	s.life.Lock()
	already := s.closed.Swap(true)
	s.life.Unlock()
	if already {
		return nil
	}
	s.cancel()
	s.wg.Wait()
	return nil
}

// Ping checks the database is reachable.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return eventstore.ErrClosed
	}
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("eventstore/postgres: ping: %w", err)
	}
	return nil
}

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
    FROM s, unnest($4::uuid[], $5::text[], $6::jsonb[], $7::jsonb[]) WITH ORDINALITY AS u(id, typ, dat, meta, ord)
    ORDER BY u.ord
    RETURNING position
)
SELECT s.base + cardinality($4::uuid[]), s.tx, (SELECT max(position) FROM ins) FROM s`
)

var (
	fastUpsertOneSQL  = fmt.Sprintf(fastUpsertCTE, "1") + fastInsertOne
	fastUpdateOneSQL  = fmt.Sprintf(fastUpdateCTE, "1") + fastInsertOne
	fastUpsertManySQL = fmt.Sprintf(fastUpsertCTE, "cardinality($4::uuid[])") + fastInsertMany
	fastUpdateManySQL = fmt.Sprintf(fastUpdateCTE, "cardinality($4::uuid[])") + fastInsertMany
)

// maxAppendRetries bounds retries of codeRetry, which needs two appenders to race within
// microseconds for the same stream; several in a row would mean something else is wrong.
const maxAppendRetries = 10

// Append writes events to stream, in one round trip unless the append is unusual (see
// fastUpsertCTE).
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if s.closed.Load() {
		return eventstore.AppendResult{}, eventstore.ErrClosed
	}
	if stream == "" {
		return eventstore.AppendResult{}, errors.New("eventstore/postgres: append: empty stream name")
	}
	ids := make([][16]byte, len(events))
	types := make([]string, len(events))
	data := make([][]byte, len(events))
	meta := make([][]byte, len(events))
	for i, ev := range events {
		// Checked here so a bad event gets an error naming it, rather than a jsonb parse
		// error about the whole array.
		if ev.Type == "" {
			return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: event %d (%s): empty type", stream, i, ev.ID)
		}
		if !json.Valid(ev.Data) {
			return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: event %d (%s, %s): data is not JSON", stream, i, ev.ID, ev.Type)
		}
		if len(ev.Metadata) > 0 && !json.Valid(ev.Metadata) {
			return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: event %d (%s, %s): metadata is not JSON", stream, i, ev.ID, ev.Type)
		}
		ids[i] = [16]byte(ev.ID)
		types[i] = ev.Type
		data[i] = ev.Data
		if len(ev.Metadata) > 0 {
			meta[i] = ev.Metadata
		}
	}

	if len(events) > 0 {
		res, ok, err := s.appendFast(ctx, stream, expected, ids, types, data, meta)
		if ok || err != nil {
			// Wake subscribers whatever the outcome: a failed append also held a transaction
			// id that may have kept other appends from being visible.
			s.appended()
			return res, err
		}
	}

	kind, rev := encodeExpected(expected)
	for attempt := 1; ; attempt++ {
		var (
			nextRev  int64
			commit   *uint64
			position *int64
		)
		err := s.pool.QueryRow(ctx, appendSQL, stream, kind, rev, ids, types, data, meta).Scan(&nextRev, &commit, &position)
		s.appended()
		if err == nil {
			res := eventstore.AppendResult{}
			if nextRev >= 0 {
				res.NextRevision = uint64(nextRev)
			}
			if commit != nil && position != nil {
				res.Position = eventstore.Position{Commit: *commit, Prepare: uint64(*position)}
			}
			return res, nil
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: %w", stream, err)
		}
		switch {
		case pgErr.Code == codeRetry && attempt < maxAppendRetries:
			continue
		case pgErr.Code == codeWrongExpectedVersion:
			actual, perr := strconv.ParseInt(pgErr.Detail, 10, 64)
			if perr != nil {
				return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: bad actual revision %q: %w", stream, pgErr.Detail, err)
			}
			wev := &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected}
			if actual >= 0 {
				wev.Actual, wev.HasActual = uint64(actual), true
			}
			return eventstore.AppendResult{}, wev
		case pgErr.Code == codeIdempotencyConflict,
			pgErr.Code == "23505" && pgErr.ConstraintName == constraintEventID:
			// 23505: an id is stored in another stream, or two appends carrying the same id
			// raced; either way it is not a repeat of this append.
			return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: %w (%s)", stream, eventstore.ErrIdempotencyConflict, pgErr.Message)
		}
		return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: %w", stream, err)
	}
}

// appendFast tries the one-statement append. ok is false when it wrote nothing and the slow
// path must decide; err is set only for failures the slow path would not change.
func (s *Store) appendFast(ctx context.Context, stream string, expected eventstore.ExpectedRevision, ids [][16]byte, types []string, data, meta [][]byte) (eventstore.AppendResult, bool, error) {
	var (
		sql  string
		cond any
	)
	one := len(ids) == 1
	switch {
	case expected.IsAny(), expected.IsNoStream():
		sql, cond = fastUpsertManySQL, expected.IsAny()
		if one {
			sql = fastUpsertOneSQL
		}
	default:
		rev, isExact := expected.ExactRevision()
		if isExact && rev > math.MaxInt64 {
			return eventstore.AppendResult{}, false, nil // cannot hold; the slow path says why
		}
		sql, cond = fastUpdateManySQL, int64(-1)
		if isExact {
			cond = int64(rev)
		}
		if one {
			sql = fastUpdateOneSQL
		}
	}
	var row pgx.Row
	if one {
		row = s.pool.QueryRow(ctx, sql, stream, cond, eventstore.Category(stream), ids[0], types[0], data[0], meta[0])
	} else {
		row = s.pool.QueryRow(ctx, sql, stream, cond, eventstore.Category(stream), ids, types, data, meta)
	}
	var (
		lastRev  int64
		commit   uint64
		position int64
	)
	err := row.Scan(&lastRev, &commit, &position)
	if err == nil {
		return eventstore.AppendResult{
			NextRevision: uint64(lastRev),
			Position:     eventstore.Position{Commit: commit, Prepare: uint64(position)},
		}, true, nil
	}
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || (errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraintEventID) {
		return eventstore.AppendResult{}, false, nil
	}
	return eventstore.AppendResult{}, false, fmt.Errorf("eventstore/postgres: append to %s: %w", stream, err)
}

// appended wakes local subscriptions now and asks the notify loop to tell other processes.
func (s *Store) appended() {
	s.wake.signal()
	select {
	case s.notifyReq <- struct{}{}:
	default: // a NOTIFY is already due; it will cover this append too
	}
}

const eventColumns = `tx_id, position, stream, revision, event_id, type, data, metadata, created_at`

const readStreamSQL = `SELECT ` + eventColumns + ` FROM events
WHERE stream = $1 AND revision >= $2 ORDER BY revision LIMIT $3`

// ReadStream returns up to max events of stream from revision from. It reads everything
// committed, not only what is below the snapshot xmin: loading an aggregate needs the latest
// revision, and within one stream revision order is already log order.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.RecordedEvent, error) {
	if s.closed.Load() {
		return nil, eventstore.ErrClosed
	}
	if max <= 0 {
		return nil, fmt.Errorf("eventstore/postgres: read stream %s: max must be positive, got %d", stream, max)
	}
	rows, err := s.pool.Query(ctx, readStreamSQL, stream, clampInt64(from), max)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read stream %s: %w", stream, err)
	}
	events, err := collectEvents(rows, max)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read stream %s: %w", stream, err)
	}
	if len(events) > 0 || from > 0 {
		// Reading past the end is no error; callers reading from a later revision know the
		// stream (they folded it), and sparing them a second query matters on hot paths.
		return events, nil
	}
	// Nothing from the start: the stream is unknown, unless it exists with no events.
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM streams WHERE name = $1)`, stream).Scan(&exists); err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read stream %s: %w", stream, err)
	}
	if !exists {
		return nil, fmt.Errorf("eventstore/postgres: read stream %s: %w", stream, eventstore.ErrStreamNotFound)
	}
	return []eventstore.RecordedEvent{}, nil
}

// ReadAll returns up to max visible events strictly after from, in log order.
func (s *Store) ReadAll(ctx context.Context, from eventstore.Position, max int, filter eventstore.Filter) ([]eventstore.RecordedEvent, error) {
	if s.closed.Load() {
		return nil, eventstore.ErrClosed
	}
	if max <= 0 {
		return nil, fmt.Errorf("eventstore/postgres: read all: max must be positive, got %d", max)
	}
	res, err := s.readLog(ctx, from, max, filter)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read all after %s: %w", from, err)
	}
	return res.events, nil
}

// horizonSQL is a one-row CTE h: "horizon", the transaction id below which the log is
// complete and may be read, and "xmax", the snapshot's xmax (so horizon < xmax tells that a
// running transaction holds the horizon back).
//
// The textbook rule is the snapshot's xmin: every transaction below it has finished, and any
// transaction that has not yet taken an id will take a larger one, so no event can ever appear
// below it. But xmin is cluster-wide: one long transaction in any other database of the server
// would stall every subscription, although it cannot write to this table. So the horizon is the
// snapshot's smallest running transaction id that is not positively known, from
// pg_stat_get_activity, to belong to another database. Unknown ids (prepared transactions, a
// transaction that ended between the snapshot and the activity read) count as ours: that can
// only hold the horizon back for one more read, never let it pass a transaction of ours.
// pg_stat_get_activity shows every session's database and xid to any role. MATERIALIZED makes
// the horizon one value per statement: inlined, the planner would compute it once for the
// rows and once for the output.
const horizonSQL = `WITH h AS MATERIALIZED (
    SELECT least(pg_snapshot_xmax(s.snap), (
               SELECT min(x) FROM pg_snapshot_xip(s.snap) AS x
               WHERE x::xid NOT IN (
                   SELECT a.backend_xid FROM pg_stat_get_activity(NULL) AS a
                   WHERE a.backend_xid IS NOT NULL AND a.datid IS NOT NULL
                     AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database())))
           ) AS horizon,
           pg_snapshot_xmax(s.snap) AS xmax
    FROM (SELECT pg_current_snapshot() AS snap) s
)`

// readLogSQL builds the log query for a filter shape. Distinct texts per shape (rather than
// "$3 IS NULL OR ...") give each its own prepared plan on the (tx_id, position) index.
//
// The horizon is computed once in the outer row and returned even when no event matches: a
// subscription uses it to skip ahead, so a filter that matches nothing does not rescan the same
// tail of the log on every poll. It must come from the same statement (snapshot) as the rows: a
// later snapshot's horizon could cover transactions this read did not see.
func readLogSQL(categories, types bool) string {
	var where strings.Builder
	if categories {
		where.WriteString(" AND e.category = ANY($4)")
	}
	if types {
		if categories {
			where.WriteString(" AND e.type = ANY($5)")
		} else {
			where.WriteString(" AND e.type = ANY($4)")
		}
	}
	// No ORDER BY outside the lateral subquery: it selects the right rows, and readLog
	// sorts them, which costs far less than a sort node over wide rows.
	return horizonSQL + `
SELECT h.horizon, h.xmax,
    coalesce(e.tx_id, '0'::xid8), coalesce(e.position, 0), coalesce(e.stream, ''),
    coalesce(e.revision, 0), coalesce(e.event_id, '00000000-0000-0000-0000-000000000000'::uuid),
    coalesce(e.type, ''), coalesce(e.data, 'null'::jsonb), e.metadata,
    coalesce(e.created_at, 'epoch'::timestamptz)
FROM h LEFT JOIN LATERAL (
    SELECT ` + eventColumns + ` FROM events e
    WHERE e.tx_id < h.horizon AND (e.tx_id, e.position) > ($1::xid8, $2::bigint)` + where.String() + `
    ORDER BY e.tx_id, e.position
    LIMIT $3
) e ON true`
}

var readLogSQLs = [4]string{
	readLogSQL(false, false), readLogSQL(true, false), readLogSQL(false, true), readLogSQL(true, true),
}

// logRead is the result of one read of the log.
type logRead struct {
	events []eventstore.RecordedEvent
	// scanned is the position up to which this read has seen every event there will ever be;
	// a reader may continue after it.
	scanned eventstore.Position
	// heldBy is the running transaction that keeps the horizon where it is, 0 if none.
	heldBy uint64
}

// readLog reads up to max visible events after from.
func (s *Store) readLog(ctx context.Context, from eventstore.Position, max int, filter eventstore.Filter) (logRead, error) {
	args := []any{from.Commit, clampInt64(from.Prepare), max}
	shape := 0
	if len(filter.Categories) > 0 {
		shape |= 1
		args = append(args, filter.Categories)
	}
	if len(filter.Types) > 0 {
		shape |= 2
		args = append(args, filter.Types)
	}
	rows, err := s.pool.Query(ctx, readLogSQLs[shape], args...)
	if err != nil {
		return logRead{}, err
	}
	defer rows.Close()
	res := logRead{events: make([]eventstore.RecordedEvent, 0, min(max, 128))}
	var horizon, xmax uint64
	for rows.Next() {
		var (
			ev       eventstore.RecordedEvent
			position int64
			revision int64
		)
		if err := rows.Scan(&horizon, &xmax, &ev.Position.Commit, &position, &ev.Stream, &revision, &ev.ID, &ev.Type, &ev.Data, &ev.Metadata, &ev.CreatedAt); err != nil {
			return logRead{}, err
		}
		if position == 0 { // the outer row of an empty result: no event, only the horizon
			continue
		}
		ev.Position.Prepare = uint64(position)
		ev.Revision = uint64(revision)
		res.events = append(res.events, ev)
	}
	if err := rows.Err(); err != nil {
		return logRead{}, err
	}
	// Nearly always already in order (pdqsort is linear then); see readLogSQL.
	slices.SortFunc(res.events, func(a, b eventstore.RecordedEvent) int {
		return cmp.Or(cmp.Compare(a.Position.Commit, b.Position.Commit), cmp.Compare(a.Position.Prepare, b.Position.Prepare))
	})
	if horizon > 0 {
		res.scanned = eventstore.Position{Commit: horizon - 1, Prepare: math.MaxInt64}
	}
	if horizon < xmax {
		res.heldBy = horizon
	}
	return res, nil
}

const headSQL = horizonSQL + `
SELECT e.tx_id, e.position FROM h JOIN LATERAL (
    SELECT tx_id, position FROM events WHERE tx_id < h.horizon
    ORDER BY tx_id DESC, position DESC LIMIT 1
) e ON true`

// HeadPosition is the position of the last visible event, Start for an empty log.
func (s *Store) HeadPosition(ctx context.Context) (eventstore.Position, error) {
	if s.closed.Load() {
		return eventstore.Position{}, eventstore.ErrClosed
	}
	var (
		commit   uint64
		position int64
	)
	err := s.pool.QueryRow(ctx, headSQL).Scan(&commit, &position)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.Start, nil
	}
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("eventstore/postgres: head position: %w", err)
	}
	return eventstore.Position{Commit: commit, Prepare: uint64(position)}, nil
}

// collectEvents scans rows of eventColumns.
func collectEvents(rows pgx.Rows, capHint int) ([]eventstore.RecordedEvent, error) {
	defer rows.Close()
	// A small start: most reads return a few events, and a large zeroed slice per read showed
	// up as a tenth of the service's CPU.
	events := make([]eventstore.RecordedEvent, 0, min(capHint, 16))
	for rows.Next() {
		var (
			ev       eventstore.RecordedEvent
			position int64
			revision int64
		)
		if err := rows.Scan(&ev.Position.Commit, &position, &ev.Stream, &revision, &ev.ID, &ev.Type, &ev.Data, &ev.Metadata, &ev.CreatedAt); err != nil {
			return nil, err
		}
		ev.Position.Prepare = uint64(position)
		ev.Revision = uint64(revision)
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return events, nil
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
