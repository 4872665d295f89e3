// Package postgres is the PostgreSQL backend of the event store (DESIGN.md section 3).
//
// All events live in one table, ordered by (transaction id, position). Readers of the log only
// see rows whose transaction id is below a horizon under which no append can still commit:
// the oldest running transaction that holds the append lock, a shared advisory lock every
// appending transaction takes before it has an id (horizonSQL). So no event can later appear
// before one already read, and a subscription never skips an event whose transaction commits
// late, without serializing appends: appends to different streams run in parallel, appends to
// one stream are serialized by a row lock on that stream. Transactions that write no events
// do not count, so the service's other work never holds subscribers back.
//
// Concurrent appends share transactions (group commit, group.go), and every subscription of
// a Store is fed by one shared reader of the live log once it has caught up (tail.go).
//
// An append left open holds every subscriber back until it ends (subscriptions log a warning
// after a minute). Code outside this package must not insert into the events table.
//
// The pool given to New belongs to the caller; group commits take up to GroupConcurrency of
// its connections, and slow-path appends one each. Subscriptions also open one dedicated
// LISTEN connection per Store, outside the pool.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/eventstore"
)

// Defaults of Config.
const (
	DefaultPollInterval   = 250 * time.Millisecond
	DefaultNotifyChannel  = "switchyard_events"
	DefaultNotifyInterval = 5 * time.Millisecond
	DefaultTailInterval   = 10 * time.Millisecond
	DefaultBatchSize      = 1000
	DefaultRetryTimeout   = 30 * time.Second
	// MaxDefaultGroupConcurrency caps Config.GroupConcurrency's default. More groups in flight
	// make each smaller, so more transactions and statements carry the same appends: on the
	// 2-core bench machine one or two groups beat eight by 20 to 30% (docs/performance.md).
	MaxDefaultGroupConcurrency = 2
)

// Config tunes a Store. The zero value is usable: every field has a default, and New refuses
// negative values (Validate).
type Config struct {
	// PollInterval is how often the log tail reads the log without being woken. Wake-ups
	// (local appends, NOTIFY from other processes) make delivery prompt; polling covers what they
	// cannot see: an append of another process that died before it could notify, a lost LISTEN
	// connection. Default 250ms.
	PollInterval time.Duration
	// NotifyChannel is the LISTEN/NOTIFY channel shared by every process on the database.
	// Default "switchyard_events".
	NotifyChannel string
	// NotifyInterval is the least time between two NOTIFYs from this Store. NOTIFY takes a
	// cluster-wide lock at commit, so it is sent by a background goroutine, coalesced, and never
	// inside an append. Default 5ms.
	NotifyInterval time.Duration
	// TailInterval is the least time between two reads of the log tail while it is woken
	// again and again (a busy log wakes it for nearly every commit): each read then takes what
	// committed meanwhile, in one round trip, instead of one read per wake-up. A wake-up after
	// a quiet interval reads at once. Subscribers of a busy log see events up to this much
	// later; none waits on them for an answer (waitForMs answers from the executor). Default
	// 10ms; negative: no interval.
	TailInterval time.Duration
	// BatchSize is the number of events a subscription reads per query. Default 1000.
	BatchSize int
	// RetryTimeout is how long a subscription retries a failing read (connection lost, server
	// restarting) before it ends with the error. Default 30s.
	RetryTimeout time.Duration
	// GroupConcurrency is how many group-commit transactions of concurrent appends may be in
	// flight at once (see group.go); appends beyond that wait and share the next one. Each
	// takes a pool connection. Default: a third of the pool's MaxConns, between 1 and 2
	// (docs/performance.md, "Group commit").
	GroupConcurrency int
	// Registerer, if set, receives the group commit and log tail metrics (metrics.go).
	Registerer prometheus.Registerer
	// CheckPayload, if set, refuses an event's data or metadata that the log's readers could
	// not take back; its error fails the append with eventstore.ErrUnstorable, writing nothing.
	// The service passes its domain's rule (domain.CheckStorableData: a NUL character, a lone
	// UTF-16 surrogate, a number beyond PostgreSQL's numeric), which a log keeping payloads as
	// json (a new one, payload.go) would otherwise store as they came, and a jsonb one refuses
	// itself. Unset, the store refuses only text that is not JSON.
	CheckPayload func(raw []byte) error
	// Logger receives warnings about retried failures. Default logrus.StandardLogger().
	Logger logrus.FieldLogger
}

func (c *Config) setDefaults() {
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.NotifyChannel == "" {
		c.NotifyChannel = DefaultNotifyChannel
	}
	if c.NotifyInterval == 0 {
		c.NotifyInterval = DefaultNotifyInterval
	}
	if c.TailInterval == 0 {
		c.TailInterval = DefaultTailInterval
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.RetryTimeout == 0 {
		c.RetryTimeout = DefaultRetryTimeout
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	// GroupConcurrency's default depends on the pool: New sets it.
}

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default.
func (c Config) Validate() error {
	switch {
	case c.PollInterval < 0:
		return fmt.Errorf("eventstore/postgres: PollInterval %v: must not be negative", c.PollInterval)
	case c.NotifyInterval < 0:
		return fmt.Errorf("eventstore/postgres: NotifyInterval %v: must not be negative", c.NotifyInterval)
	case c.BatchSize < 0:
		return fmt.Errorf("eventstore/postgres: BatchSize %d: must be at least 1 (0 takes the default)", c.BatchSize)
	case c.RetryTimeout < 0:
		return fmt.Errorf("eventstore/postgres: RetryTimeout %v: must not be negative", c.RetryTimeout)
	case c.GroupConcurrency < 0:
		return fmt.Errorf("eventstore/postgres: GroupConcurrency %d: must be at least 1 (0 takes the default)", c.GroupConcurrency)
	}
	return nil
}

// Store is the PostgreSQL event store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	opts Config
	// payload is the type of the log's data and metadata columns, which the append's array
	// parameters are cast to (payload.go).
	payload payload
	log     logrus.FieldLogger
	// instance tags this Store's NOTIFYs so its own listener can ignore them: local
	// subscribers were already woken in-process.
	instance string

	ctx    context.Context // cancelled by Close; parent of every background goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	// life orders Close against Subscribe: wg.Add must not race with wg.Wait.
	life sync.Mutex

	group grouper // group commit of concurrent appends
	tail  tail    // the one reader of the live log, shared by every subscription
	// lockSlots spreads appenders over the append lock's keys (appendLockSQL).
	lockSlots atomic.Uint32
	// streamLocks bounds the pooled connections held by turns (TakeTurn).
	streamLocks chan struct{}

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
func New(ctx context.Context, pool *pgxpool.Pool, opts Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("eventstore/postgres: new: nil pool")
	}
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var ok bool
	var payloadType *string
	if err := pool.QueryRow(ctx, "SELECT to_regprocedure('eventstore_append(text,int,bigint,uuid[],text[],jsonb[],jsonb[])') IS NOT NULL, ("+payloadTypeSQL+")").Scan(&ok, &payloadType); err != nil {
		return nil, fmt.Errorf("eventstore/postgres: new: check schema: %w", err)
	}
	if !ok || payloadType == nil {
		return nil, errors.New("eventstore/postgres: new: schema missing: run postgres.Migrate (switchyard migrate) first")
	}
	payload, err := payloadOf(*payloadType)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: new: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		pool:      pool,
		opts:      opts,
		payload:   payload,
		log:       opts.Logger.WithField("component", "eventstore/postgres"),
		instance:  uuid.NewString(),
		ctx:       sctx,
		cancel:    cancel,
		notifyReq: make(chan struct{}, 1),
		// A holder needs a second connection for its reads and appends: lock holders on every
		// connection would wait for one for ever.
		streamLocks: make(chan struct{}, max(1, int(pool.Config().MaxConns)/4)),
	}
	s.tail.s = s
	s.group.s, s.group.max = s, opts.GroupConcurrency
	if s.group.max == 0 {
		s.group.max = min(MaxDefaultGroupConcurrency, max(1, int(pool.Config().MaxConns)/3))
	}
	s.wake.init()
	s.listenUp.init()
	if opts.Registerer != nil {
		s.registerMetrics(opts.Registerer)
	}
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
	if from == 0 {
		return s.readStreamFromStart(ctx, stream, max)
	}
	// Reading past the end is no error; callers reading from a later revision know the stream
	// (they folded it), and sparing them a second query matters on hot paths.
	rows, err := s.pool.Query(ctx, readStreamSQL, stream, clampInt64(from), max)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read stream %s: %w", stream, err)
	}
	events, err := collectEvents(rows, max)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read stream %s: %w", stream, err)
	}
	return events, nil
}

// streamExistsSQL tells a stream with no events from an unknown one.
const streamExistsSQL = `SELECT EXISTS (SELECT 1 FROM streams WHERE name = $1)`

// readStreamFromStart reads a stream from its first event and, in the same round trip, whether
// it exists: nothing read is ErrStreamNotFound unless the stream exists with no events. Calls
// that find no stream are common (a cache window or idempotency key not used yet), so the check
// rides with the read instead of costing a round trip of its own.
func (s *Store) readStreamFromStart(ctx context.Context, stream string, max int) ([]eventstore.RecordedEvent, error) {
	b := &pgx.Batch{}
	b.Queue(readStreamSQL, stream, int64(0), max)
	b.Queue(streamExistsSQL, stream)
	br := s.pool.SendBatch(ctx, b)
	events, err := readFromStart(br, max)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read stream %s: %w", stream, err)
	}
	return events, nil
}

func readFromStart(br pgx.BatchResults, max int) ([]eventstore.RecordedEvent, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	events, err := collectEvents(rows, max)
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := br.QueryRow().Scan(&exists); err != nil {
		return nil, err
	}
	if len(events) == 0 && !exists {
		return nil, eventstore.ErrStreamNotFound
	}
	return events, nil
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

// horizonSQL returns "horizon", the transaction id below which the log is complete and may be
// read, and "xmax", its snapshot's xmax (so horizon < xmax tells that a running append holds
// the horizon back).
//
// The textbook rule is the snapshot's xmin: every transaction below it has finished. But xmin
// counts every transaction, so any open transaction of the service that writes no event (a
// projector's batch, a replay-guard insert, a migration) would hold every subscriber back. So
// only appending transactions count: every transaction that writes events first takes the
// append lock (appendLockSQL, a shared transaction-scoped advisory lock), before it has a
// transaction id. The horizon is then the snapshot's xmax, lowered to the smallest of its
// running transaction ids that belongs to a holder of the append lock in this database.
//
// Why no event can appear below it later, for a transaction T that appends:
//   - T held the lock when pg_locks was read, with an id: the horizon is at most T's id.
//   - T held it without an id yet, or took it later: T's id will be at least the next id at
//     that moment, so at least this snapshot's xmax.
//   - T had released it (ended) before pg_locks was read: T is visible to any snapshot taken
//     after this statement. That is why readLog takes the horizon in one statement and reads
//     the rows in a later one: a snapshot taken at the start of the same statement would
//     predate T's commit and miss T's events for ever.
//
// pg_stat_get_activity gives each session's running transaction id (backend_xid) to any
// role; MATERIALIZED makes each input one value per statement.
const horizonSQL = `WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s),
holders AS MATERIALIZED (
    SELECT a.backend_xid AS xid
    FROM pg_locks l JOIN pg_stat_get_activity(NULL) a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.classid = ` + appendLockClassSQL + ` AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND a.backend_xid IS NOT NULL
)
SELECT least(pg_snapshot_xmax(snap.s),
             (SELECT min(x) FROM pg_snapshot_xip(snap.s) AS x WHERE x::xid IN (SELECT xid FROM holders))),
       pg_snapshot_xmax(snap.s)
FROM snap`

// readLogSQL builds the log query for a filter shape. Distinct texts per shape (rather than
// "$3 IS NULL OR ...") give each its own prepared plan on the (tx_id, position) index. The
// horizon comes from an earlier statement (horizonSQL): $4, or, with fromSetting, the
// transaction-local setting horizonSetSQL leaves, so both statements go in one round trip.
func readLogSQL(categories, types, fromSetting bool) string {
	horizon, next := "$4::xid8", 5
	if fromSetting {
		horizon, next = "current_setting('"+horizonSetting+"')::xid8", 4
	}
	var where strings.Builder
	if categories {
		fmt.Fprintf(&where, " AND e.category = ANY($%d)", next)
		next++
	}
	if types {
		fmt.Fprintf(&where, " AND e.type = ANY($%d)", next)
	}
	return `SELECT ` + eventColumns + ` FROM events e
WHERE e.tx_id < ` + horizon + ` AND (e.tx_id, e.position) > ($1::xid8, $2::bigint)` + where.String() + `
ORDER BY e.tx_id, e.position
LIMIT $3`
}

// readLogSQLs are readLogSQL's texts by shape (bit 0: categories, bit 1: types), reading the
// horizon from the setting.
var readLogSQLs = [4]string{
	readLogSQL(false, false, true), readLogSQL(true, false, true), readLogSQL(false, true, true), readLogSQL(true, true, true),
}

// horizonSetting is the transaction-local setting through which horizonSetSQL hands the horizon
// to the read pipelined after it.
const horizonSetting = "switchyard.horizon"

// horizonSetSQL is horizonSQL that also leaves the horizon in horizonSetting for the rest of
// the (implicit) transaction of its batch. The read after it is a statement of its own, with
// a snapshot taken after the horizon's, as horizonSQL requires.
const horizonSetSQL = `SELECT h.horizon, h.xmax, set_config('` + horizonSetting + `', h.horizon::text, true)
FROM (` + horizonSQL + `) AS h(horizon, xmax)`

// horizon runs horizonSQL.
func (s *Store) horizon(ctx context.Context) (horizon, xmax uint64, err error) {
	err = s.pool.QueryRow(ctx, horizonSQL).Scan(&horizon, &xmax)
	return horizon, xmax, err
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
// The horizon and the read go in one batch: one round trip, two statements (horizonSetSQL).
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
	b := &pgx.Batch{}
	b.Queue(horizonSetSQL)
	b.Queue(readLogSQLs[shape], args...)
	br := s.pool.SendBatch(ctx, b)
	var (
		horizon, xmax uint64
		set           string
		events        []eventstore.RecordedEvent
	)
	err := br.QueryRow().Scan(&horizon, &xmax, &set)
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			events, err = collectEvents(rows, max)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return logRead{}, err
	}
	res := logRead{events: events}
	if horizon > 0 {
		res.scanned = eventstore.Position{Commit: horizon - 1, Prepare: math.MaxInt64}
	}
	if horizon < xmax {
		res.heldBy = horizon
	}
	return res, nil
}

const headSQL = `SELECT tx_id, position FROM events WHERE tx_id < $1::xid8
ORDER BY tx_id DESC, position DESC LIMIT 1`

// HeadPosition is the position of the last visible event, Start for an empty log.
func (s *Store) HeadPosition(ctx context.Context) (eventstore.Position, error) {
	if s.closed.Load() {
		return eventstore.Position{}, eventstore.ErrClosed
	}
	var (
		commit   uint64
		position int64
	)
	horizon, _, err := s.horizon(ctx)
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("eventstore/postgres: head position: %w", err)
	}
	err = s.pool.QueryRow(ctx, headSQL, horizon).Scan(&commit, &position)
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
