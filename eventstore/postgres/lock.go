package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/switchyard/switchyard/eventstore"
)

// streamLockClass is the first key of stream locks (LockStream), apart from the append lock's
// class that horizonSQL looks for: a stream lock holder is no appender.
const streamLockClass = 1398231892 // "SWST"

var _ eventstore.StreamLocker = (*Store)(nil)

// LockStream implements eventstore.StreamLocker with a session advisory lock keyed by a hash of
// the stream's name, held on a pooled connection until unlock. Two streams whose names hash
// alike share a lock: their writers only wait for each other more than they need to.
//
// At most a quarter of the pool's connections hold or wait for stream locks at once; past
// that, LockStream waits for one of them to be released, as long as ctx lasts.
func (s *Store) LockStream(ctx context.Context, stream string) (func(), error) {
	select {
	case s.streamLocks <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("eventstore/postgres: lock %s: every connection for stream locks is taken: %w", stream, ctx.Err())
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		<-s.streamLocks
		return nil, fmt.Errorf("eventstore/postgres: lock %s: %w", stream, err)
	}
	key := streamLockKey(stream)
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1::int, $2::int)`, streamLockClass, key); err != nil {
		// A wait cut short by ctx leaves the session's state unknown: it goes, and the lock with
		// it should the server have granted it after all.
		c.Conn().Close(context.WithoutCancel(ctx)) //nolint:errcheck // closing is the point
		c.Release()
		<-s.streamLocks
		return nil, fmt.Errorf("eventstore/postgres: lock %s: %w", stream, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var released bool
		if err := c.QueryRow(ctx, `SELECT pg_advisory_unlock($1::int, $2::int)`, streamLockClass, key).Scan(&released); err != nil || !released {
			c.Conn().Close(ctx) //nolint:errcheck // closing the session releases the lock for sure
		}
		c.Release()
		<-s.streamLocks
	}, nil
}

// streamLockKey is the second key of stream's lock.
func streamLockKey(stream string) int32 {
	h := fnv.New32a()
	h.Write([]byte(stream))
	return int32(h.Sum32())
}
