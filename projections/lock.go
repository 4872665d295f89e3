package projections

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockCheckInterval is how often a lock session confirms its connection still answers; a lost
// connection means another instance may take its locks over.
const lockCheckInterval = 5 * time.Second

// lockRetryInterval is how often a process waiting for a lock asks for it again: the most a
// standby's takeover lags behind the holder's end.
const lockRetryInterval = 500 * time.Millisecond

// lockStatementTimeout bounds each statement on a lock session's connection. Statements run
// under it rather than under a holder's context: a statement cancelled mid-flight closes the
// connection, and with it every other holder's locks.
const lockStatementTimeout = 5 * time.Second

// HoldLock runs fn while holding the session advisory lock called name, waiting for it as long
// as ctx lasts: one holder at a time, across every process on the database. Every lock of a
// process on one database is held on a single connection outside the pool, its lock session
// (shared by the callers with the same connection settings): a lock held as long as a projector
// or a reactor runs must not take a pooled connection, and a connection per lock made each
// instance take some twenty connection slots, standbys included. fn's context ends if the
// session's connection stops answering, as it does when the database restarts; the locks are
// then free for another process, and their holders here ask again on a new connection.
func HoldLock(ctx context.Context, cfg *pgx.ConnConfig, name string, fn func(context.Context) error) error {
	s := lockSessions.join(cfg)
	defer lockSessions.leave(s)
	return s.hold(ctx, lockKey(name), fn)
}

// lockSessionRegistry holds the process's open lock sessions, by connection settings.
type lockSessionRegistry struct {
	mu       sync.Mutex
	sessions map[string]*lockSession
}

var lockSessions = &lockSessionRegistry{sessions: map[string]*lockSession{}}

// join returns the session for cfg's settings, opening it (without connecting) if none is.
func (r *lockSessionRegistry) join(cfg *pgx.ConnConfig) *lockSession {
	key := sessionKey(cfg)
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[key]
	if !ok {
		s = &lockSession{cfg: cfg.Copy(), use: make(chan struct{}, 1), held: map[int64]bool{}}
		r.sessions[key] = s
	}
	s.users++
	return s
}

// leave closes the session's connection once its last user has left: a process that holds and
// waits for nothing keeps no connection, and a test's database can be dropped.
func (r *lockSessionRegistry) leave(s *lockSession) {
	r.mu.Lock()
	s.users--
	last := s.users == 0
	if last {
		delete(r.sessions, sessionKey(s.cfg))
	}
	r.mu.Unlock()
	if last {
		s.use <- struct{}{}
		s.drop()
		<-s.use
	}
}

// sessionKey tells apart the connection settings that make different sessions: the server,
// database and role, and the runtime parameters (an application_name sets a session apart).
func sessionKey(cfg *pgx.ConnConfig) string {
	params := make([]string, 0, len(cfg.RuntimeParams))
	for k, v := range cfg.RuntimeParams {
		params = append(params, k+"="+v)
	}
	slices.Sort(params)
	return fmt.Sprintf("%s:%d/%s@%s?%s", cfg.Host, cfg.Port, cfg.Database, cfg.User, strings.Join(params, "&"))
}

// lockSession is one connection holding any number of session advisory locks for the
// holders of one process. PostgreSQL grants a session a lock it already holds again (advisory
// locks are re-entrant), so the session itself keeps two holders of the process from sharing
// a name: held lists the names taken or being asked for here.
type lockSession struct {
	cfg   *pgx.ConnConfig
	users int // under lockSessions.mu

	// use is a token: whoever has it may use conn, which runs one statement at a time.
	use  chan struct{}
	conn *pgx.Conn
	// live ends when conn is lost or closed, and with it the context of every holder on it.
	live     context.Context
	loseLive context.CancelFunc

	mu   sync.Mutex
	held map[int64]bool
}

// hold waits for key, runs fn while it is held, and lets go of it.
func (s *lockSession) hold(ctx context.Context, key int64, fn func(context.Context) error) error {
	live, err := s.acquire(ctx, key)
	if err != nil {
		return err
	}
	lockCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(live, cancel)
	err = fn(lockCtx)
	stop()
	cancel()
	s.release(key, live)
	return err
}

// acquire asks for key every lockRetryInterval (with jitter, so that standbys do not ask in
// step) until it is granted or ctx ends, and returns the context of the connection that holds
// it. It never waits inside a statement: a backend blocked in pg_advisory_lock holds its
// statement's snapshot all the while, and with it the database's xmin horizon, so that no dead
// row version anywhere in the database could be pruned or vacuumed for as long as a standby
// instance waited. Hot rows (an account's stream row, its balance, the projection checkpoints)
// then grew HOT chains that every read walked, without end.
func (s *lockSession) acquire(ctx context.Context, key int64) (context.Context, error) {
	for {
		live, err := s.try(ctx, key)
		if err != nil || live != nil {
			return live, err
		}
		wait := time.NewTimer(lockRetryInterval/2 + rand.N(lockRetryInterval))
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, ctx.Err()
		case <-wait.C:
		}
	}
}

// try asks once for key; it returns nil, nil when another holder, here or elsewhere, has it.
func (s *lockSession) try(ctx context.Context, key int64) (context.Context, error) {
	s.mu.Lock()
	if s.held[key] {
		s.mu.Unlock()
		return nil, nil
	}
	s.held[key] = true // asked for: no other holder here asks meanwhile
	s.mu.Unlock()
	live, err := s.tryOnConn(ctx, key)
	if live == nil {
		s.mu.Lock()
		delete(s.held, key)
		s.mu.Unlock()
	}
	return live, err
}

func (s *lockSession) tryOnConn(ctx context.Context, key int64) (context.Context, error) {
	select {
	case s.use <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.use }()
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(context.Background(), lockStatementTimeout)
	defer cancel()
	var got bool
	if err := s.conn.QueryRow(qctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
		s.drop()
		return nil, err
	}
	if !got {
		return nil, nil
	}
	return s.live, nil
}

// release lets go of key, unless the connection it was taken on is gone (and the lock with it).
func (s *lockSession) release(key int64, live context.Context) {
	s.use <- struct{}{}
	if live.Err() == nil && s.live == live {
		qctx, cancel := context.WithTimeout(context.Background(), lockStatementTimeout)
		if _, err := s.conn.Exec(qctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
			s.drop() // the lock must not outlive its holder: closing the session frees it
		}
		cancel()
	}
	<-s.use
	s.mu.Lock()
	delete(s.held, key)
	s.mu.Unlock()
}

// connect opens the session's connection if it has none, and watches it. The caller has use.
func (s *lockSession) connect(ctx context.Context) error {
	if s.conn != nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 2*lockStatementTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, s.cfg.Copy())
	if err != nil {
		return err
	}
	s.conn = conn
	s.live, s.loseLive = context.WithCancel(context.Background())
	go s.watch(conn, s.live)
	return nil
}

// drop closes the connection, which frees every lock it held, and ends its holders' contexts.
// The caller has use.
func (s *lockSession) drop() {
	if s.conn == nil {
		return
	}
	s.loseLive()
	ctx, cancel := context.WithTimeout(context.Background(), lockStatementTimeout)
	s.conn.Close(ctx)
	cancel()
	s.conn = nil
}

// watch pings conn every lockCheckInterval until it is dropped, and drops it when it does not
// answer.
func (s *lockSession) watch(conn *pgx.Conn, live context.Context) {
	t := time.NewTicker(lockCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-live.Done():
			return
		case <-t.C:
		}
		select {
		case s.use <- struct{}{}:
		case <-live.Done():
			return
		}
		if s.conn == conn {
			pctx, cancel := context.WithTimeout(context.Background(), lockStatementTimeout)
			if err := conn.Ping(pctx); err != nil {
				s.drop()
			}
			cancel()
		}
		<-s.use
	}
}
