package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/eventstore"
)

// broadcaster wakes every goroutine waiting on it. A waiter takes the channel before it reads
// the log and waits on it after: a signal in between closes that very channel, so no wake-up
// is lost between "read, found nothing" and "wait".
type broadcaster struct {
	mu      sync.Mutex
	ch      chan struct{}
	waiting bool // someone holds ch: only then is a new channel worth allocating
}

func (b *broadcaster) init() { b.ch = make(chan struct{}) }

func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting = true
	return b.ch
}

func (b *broadcaster) signal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.waiting {
		return
	}
	close(b.ch)
	b.ch = make(chan struct{})
	b.waiting = false
}

// notifyLoop sends NOTIFY for appends made through this Store, at most once per
// NotifyInterval. NOTIFY is not sent in the append transaction because every committing
// transaction that has notified takes one cluster-wide lock on the notification queue, which
// would serialize all appends; coalesced here it costs one small transaction per interval.
func (s *Store) notifyLoop() {
	defer s.wg.Done()
	timer := time.NewTimer(0)
	<-timer.C
	for {
		select {
		case <-s.notifyReq:
		case <-s.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", s.opts.NotifyChannel, s.instance)
		cancel()
		if err != nil && s.ctx.Err() == nil {
			// Subscribers elsewhere still poll; a lost NOTIFY only delays them.
			s.log.WithError(err).Warn("notify subscribers in other processes")
		}
		timer.Reset(s.opts.NotifyInterval)
		select {
		case <-timer.C:
		case <-s.ctx.Done():
			return
		}
	}
}

// startListener starts, once per Store, the goroutine that LISTENs for other processes'
// appends. It is started by the first subscription, so a Store that only appends holds no
// extra connection.
func (s *Store) startListener() {
	s.listenOnce.Do(func() {
		s.wg.Add(1)
		go s.listenLoop()
	})
}

// listenHealthInterval is how long the listener waits for a notification before checking its
// connection: a half-open TCP connection would otherwise wait silently for ever.
const listenHealthInterval = 30 * time.Second

func (s *Store) listenLoop() {
	defer s.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		connected, err := s.listen()
		if s.ctx.Err() != nil {
			return
		}
		if connected {
			backoff = 100 * time.Millisecond
		}
		// Subscriptions poll meanwhile, so the only cost of the outage is latency.
		s.log.WithError(err).WithField("retry_in", backoff).Warn("LISTEN connection lost; reconnecting")
		if !sleepCtx(s.ctx, backoff) {
			return
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listen holds one LISTEN connection until it fails or the Store closes. It reports whether the
// LISTEN was established, so the caller can reset its backoff.
func (s *Store) listen() (bool, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(s.ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(ctx) //nolint:errcheck // closing a connection we are abandoning anyway
	}()
	if _, err := conn.Exec(s.ctx, "LISTEN "+pgx.Identifier{s.opts.NotifyChannel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	s.listenPID.Store(conn.PgConn().PID())
	s.listenConnects.Add(1)
	s.listenUp.signal()
	// Notifications sent while no connection was listening are lost: read again.
	s.wake.signal()
	for {
		ctx, cancel := context.WithTimeout(s.ctx, listenHealthInterval)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		switch {
		case err == nil:
			if n.Payload != s.instance {
				s.wake.signal()
			}
		case s.ctx.Err() != nil:
			return true, s.ctx.Err()
		case pgconn.Timeout(err) && !conn.IsClosed():
			pctx, pcancel := context.WithTimeout(s.ctx, 5*time.Second)
			err = conn.Ping(pctx)
			pcancel()
			if err != nil {
				return true, fmt.Errorf("health check: %w", err)
			}
		default:
			return true, fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// Subscribe delivers every visible event after from that matches filter: first what is
// stored, in batches, then new events as they become visible.
func (s *Store) Subscribe(ctx context.Context, from eventstore.Position, filter eventstore.Filter) (eventstore.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("eventstore/postgres: subscribe: %w", err)
	}
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed.Load() {
		return nil, eventstore.ErrClosed
	}
	s.startListener()
	s.tail.start()
	// The caller may reuse its slices; the subscription reads them for its whole life.
	filter = eventstore.Filter{Categories: slices.Clone(filter.Categories), Types: slices.Clone(filter.Types)}
	sctx, cancel := context.WithCancel(ctx)
	// Closing the Store ends the subscription; the subscription ending must not leak the hook.
	stop := context.AfterFunc(s.ctx, cancel)
	sub := &subscription{
		events: make(chan eventstore.RecordedEvent, s.opts.BatchSize),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(sub.done)
		defer close(sub.events)
		defer stop()
		defer cancel()
		err := s.follow(sctx, sub.events, from, filter, sub.scan)
		switch {
		case err != nil:
		case sub.closed.Load(), ctx.Err() != nil:
			// Ended by the subscriber: not an error.
		case s.ctx.Err() != nil:
			err = eventstore.ErrClosed
		}
		sub.setErr(err)
	}()
	return sub, nil
}

// follow feeds out until ctx ends (nil) or the log cannot be read (the error): it catches up
// by reading the log itself, then joins the Store's shared tail (tail.go), and reads on its
// own again whenever the tail evicts it.
//
// scanned is told the cursor each time it moves past a read: every selected event up to it has
// been sent on out by then.
func (s *Store) follow(ctx context.Context, out chan<- eventstore.RecordedEvent, from eventstore.Position, filter eventstore.Filter,
	scanned func(eventstore.Position)) error {
	cursor := from // every event up to cursor has been delivered or filtered out
	for {
		var err error
		if cursor, err = s.catchUp(ctx, out, cursor, filter, scanned); err != nil || ctx.Err() != nil {
			return err
		}
		m := s.tail.join(cursor, filter)
		if m == nil {
			continue // the tail has moved on further than it remembers: read again
		}
		// live ends on eviction (read on our own again) or with ctx's error (checked below).
		cursor, _ = s.tail.live(ctx, out, m, cursor, scanned)
		s.tail.leave(m)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// catchUp reads the log after cursor until a read comes back short, and returns how far it
// got.
func (s *Store) catchUp(ctx context.Context, out chan<- eventstore.RecordedEvent, cursor eventstore.Position, filter eventstore.Filter,
	scanned func(eventstore.Position)) (eventstore.Position, error) {
	var failingSince time.Time
	backoff := 50 * time.Millisecond
	for {
		res, err := s.readLog(ctx, cursor, s.opts.BatchSize, filter)
		if err != nil {
			if ctx.Err() != nil {
				return cursor, nil
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if !transient(err) || time.Since(failingSince) > s.opts.RetryTimeout {
				return cursor, fmt.Errorf("eventstore/postgres: subscription: read after %s: %w", cursor, err)
			}
			s.log.WithError(err).WithField("retry_in", backoff).Warn("subscription read failed; retrying")
			if !sleepCtx(ctx, backoff) {
				return cursor, nil
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		failingSince, backoff = time.Time{}, 50*time.Millisecond
		for _, ev := range res.events {
			select {
			case out <- ev:
			case <-ctx.Done():
				return cursor, nil
			}
			cursor = ev.Position
		}
		s.subscriptionReads.Add(1)
		if len(res.events) < s.opts.BatchSize {
			// Caught up with what is visible. Skipping to the scanned horizon matters for
			// sparse filters: the next read starts after what this one scanned, not after
			// the last match.
			if cursor.Less(res.scanned) {
				cursor = res.scanned
			}
			scanned(cursor)
			return cursor, nil
		}
		scanned(cursor)
	}
}

// stuckWarnAfter is how long the visibility horizon may stay held by one transaction before
// subscriptions log a warning.
const stuckWarnAfter = time.Minute

// transient reports whether a failed read is worth retrying: the connection or the server
// went away, rather than the query or the schema being wrong.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"53", // insufficient resources (too many connections, out of memory)
			"57": // operator intervention (shutdown, crash recovery)
			return true
		}
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.As(err, &netErr) ||
		errors.As(err, &connectErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// sleepCtx waits d (a retry backoff, not a wait for a condition); false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type subscription struct {
	events chan eventstore.RecordedEvent
	cancel context.CancelFunc
	done   chan struct{}
	closed atomic.Bool
	// scanned is how far follow has read (eventstore.Progress).
	scanned atomic.Pointer[eventstore.Position]

	mu  sync.Mutex
	err error
}

func (s *subscription) Events() <-chan eventstore.RecordedEvent { return s.events }

var _ eventstore.Progress = (*subscription)(nil)

// Scanned implements eventstore.Progress.
func (s *subscription) Scanned() eventstore.Position {
	if p := s.scanned.Load(); p != nil {
		return *p
	}
	return eventstore.Position{}
}

// scan records how far follow has read, after it sent what it selected up to there.
func (s *subscription) scan(p eventstore.Position) { s.scanned.Store(&p) }

func (s *subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *subscription) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Close ends the subscription and returns once its goroutine has exited. Events already
// buffered stay readable until the channel is drained.
func (s *subscription) Close() {
	s.closed.Store(true)
	s.cancel()
	<-s.done
}
