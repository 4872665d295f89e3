package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore"
)

// streamLockClass is the first key of stream locks (TakeTurn), apart from the append lock's
// class that horizonSQL looks for: a turn is no appender until it appends.
const streamLockClass = 1398231892 // "SWST"

// turnReadPage is how many events a turn reads per round trip.
const turnReadPage = 1000

// turnEndTimeout bounds the rollback that ends a turn without an append.
const turnEndTimeout = 5 * time.Second

// errTurnEnded is the answer of a turn's AppendMulti after the turn ended.
var errTurnEnded = errors.New("eventstore/postgres: the turn has ended")

var _ eventstore.StreamTurns = (*Store)(nil)

// TakeTurn implements eventstore.StreamTurns. A turn is a transaction on a pooled connection
// holding a transaction-scoped advisory lock keyed by a hash of the stream's name: the first
// round trip begins it, waits for the lock and reads the stream on; the turn's AppendMulti
// sends its statements and the commit, which releases the lock, in the second. Two streams
// whose names hash alike share a lock: their writers only wait for each other more than they
// need to.
//
// At most a quarter of the pool's connections hold or wait for turns at once; past that,
// TakeTurn waits for one to end, as long as ctx lasts.
func (s *Store) TakeTurn(ctx context.Context, stream string, from uint64) (eventstore.Turn, error) {
	t, err := s.takeTurns(ctx, map[string]uint64{stream: from})
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: turn on %s: %w", stream, err)
	}
	t.stream = stream
	return t, nil
}

var _ eventstore.StreamsTurns = (*Store)(nil)

// TakeTurns implements eventstore.StreamsTurns: TakeTurn's transaction taking every stream's
// lock, in the order of their keys (so that two processes' turns on overlapping streams never
// wait for each other in a cycle), and reading each stream on, in its first round trip.
func (s *Store) TakeTurns(ctx context.Context, from map[string]uint64) (eventstore.Turns, error) {
	t, err := s.takeTurns(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: turn on %d streams: %w", len(from), err)
	}
	return t, nil
}

func (s *Store) takeTurns(ctx context.Context, from map[string]uint64) (*turn, error) {
	if s.closed.Load() {
		return nil, eventstore.ErrClosed
	}
	select {
	case s.streamLocks <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("every connection for turns is taken: %w", ctx.Err())
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		<-s.streamLocks
		return nil, err
	}
	t := &turn{s: s, conn: c, events: map[string][]eventstore.RecordedEvent{}}
	if err := t.begin(ctx, from); err != nil {
		// A wait cut short by ctx leaves the session's state unknown: it goes, and the locks
		// with it should the server have granted them after all.
		t.end(true)
		return nil, err
	}
	return t, nil
}

// turn is an open turn: its connection is inside the transaction that holds the locks.
type turn struct {
	s      *Store
	conn   *pgxpool.Conn
	stream string // the one stream of a TakeTurn
	events map[string][]eventstore.RecordedEvent
	done   bool
}

// turnLocksSQL waits for the turn's locks one after the other, in the order of the keys given
// (a function scan yields an array's elements in order).
const turnLocksSQL = `SELECT pg_advisory_xact_lock($1::int, k) FROM unnest($2::int[]) AS k`

// turnReadSQL reads each stream on from its revision, a page of each, in one statement.
const turnReadSQL = `SELECT e.* FROM unnest($1::text[], $2::bigint[]) AS f(stream, rev)
CROSS JOIN LATERAL (SELECT ` + eventColumns + ` FROM events
    WHERE stream = f.stream AND revision >= f.rev ORDER BY revision LIMIT $3) e`

// begin opens the transaction, waits for the locks and reads each stream on from its revision.
func (t *turn) begin(ctx context.Context, from map[string]uint64) error {
	streams := slices.Sorted(maps.Keys(from))
	keys := make([]int32, 0, len(streams))
	revs := make([]int64, len(streams))
	for i, s := range streams {
		keys = append(keys, streamLockKey(s))
		revs[i] = clampInt64(from[s])
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // streams whose names hash alike share their lock
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(turnLocksSQL, streamLockClass, keys)
	b.Queue(turnReadSQL, streams, revs, turnReadPage)
	br := t.conn.SendBatch(ctx, b)
	err := execAll(br, 2)
	if err == nil {
		var rows pgx.Rows
		var events []eventstore.RecordedEvent
		if rows, err = br.Query(); err == nil {
			events, err = collectEvents(rows, turnReadPage)
		}
		for _, ev := range events {
			t.events[ev.Stream] = append(t.events[ev.Stream], ev)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	for _, s := range streams {
		if err == nil && len(t.events[s]) == turnReadPage {
			err = t.readRest(ctx, s)
		}
	}
	return err
}

// readRest reads on the stream's events past the first page, a page a round trip.
func (t *turn) readRest(ctx context.Context, stream string) error {
	for page := t.events[stream]; len(page) == turnReadPage; {
		from := page[len(page)-1].Revision + 1
		rows, err := t.conn.Query(ctx, readStreamSQL, stream, clampInt64(from), turnReadPage)
		if err != nil {
			return err
		}
		if page, err = collectEvents(rows, turnReadPage); err != nil {
			return err
		}
		t.events[stream] = append(t.events[stream], page...)
	}
	return nil
}

func (t *turn) Events() []eventstore.RecordedEvent { return t.events[t.stream] }

func (t *turn) EventsOf(stream string) []eventstore.RecordedEvent { return t.events[stream] }

// AppendMulti sends the fast path of Store.AppendMulti and the commit in one round trip. An
// unusual or declined part ends the turn, and the multi-append goes on outside it as any
// AppendMulti's slow path does: each part's expectation still decides.
func (t *turn) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	res, err := t.appendMulti(ctx, appends)
	return res, unstorable(err)
}

func (t *turn) appendMulti(ctx context.Context, appends []eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	if t.done {
		return nil, errTurnEnded
	}
	parts, err := t.s.encodeParts(appends)
	if err != nil || len(parts) == 0 {
		t.End()
		return []eventstore.AppendResult{}, err
	}
	claims, err := collectClaims(appends)
	if err != nil {
		t.End()
		return nil, err
	}
	defer t.s.appended()
	res, ok, err := t.s.multiFast(ctx, t.conn, parts, claims, true)
	if ok {
		t.end(false)
		return res, nil
	}
	t.End()
	if err != nil {
		return nil, err
	}
	return t.s.multiSlowRetried(ctx, parts, claims)
}

// End rolls the turn's transaction back, which releases the lock.
func (t *turn) End() {
	if t.done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), turnEndTimeout)
	defer cancel()
	_, err := t.conn.Exec(ctx, `ROLLBACK`)
	t.end(err != nil)
}

// end gives the connection back; a broken one (or one in an unknown state) is closed, which
// ends its session and so releases the lock for sure.
func (t *turn) end(broken bool) {
	if t.done {
		return
	}
	t.done = true
	if broken {
		ctx, cancel := context.WithTimeout(context.Background(), turnEndTimeout)
		t.conn.Conn().Close(ctx) //nolint:errcheck // closing is the point
		cancel()
	}
	t.conn.Release()
	<-t.s.streamLocks
}

// streamLockKey is the second key of stream's lock.
func streamLockKey(stream string) int32 {
	h := fnv.New32a()
	h.Write([]byte(stream))
	return int32(h.Sum32())
}
