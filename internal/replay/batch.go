package replay

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore/postgres"
)

// Concurrent Seen calls share one statement: one round trip and one transaction for every
// signature that arrived while the guard's statements were busy, instead of one each. There
// is no timer: a call that finds fewer than Concurrency statements in flight runs at once, so
// a lone request waits for nothing.

// batchTimeout bounds one shared statement; a member's own context only stops its wait.
const batchTimeout = 10 * time.Second

// batchMax caps the signatures of one statement.
const batchMax = 512

// claimSQL inserts the batch's signatures and returns those it claimed: new ones, expired rows
// taken over, and rows their owner holds already. The rest are held by a live row of another
// owner: replays.
const claimSQL = `INSERT INTO ` + postgres.ClaimsTable + ` AS c (key, owner, expires_at)
	SELECT k, o, e FROM unnest($1::bytea[], $2::bytea[], $3::timestamptz[]) AS t(k, o, e)
	ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
		WHERE c.expires_at < $4 OR c.owner = EXCLUDED.owner
	RETURNING key`

type batcher struct {
	pool *pgxpool.Pool
	max  int

	mu      sync.Mutex
	queue   []*seenReq
	running int

	statements atomic.Int64 // shared statements run, for tests
}

type seenReq struct {
	ctx   context.Context
	sum   [32]byte
	owner []byte
	until time.Time
	now   time.Time
	seen  bool
	err   error
	done  chan struct{}
}

// seen claims sum in the next shared statement and reports whether a live row already held it.
func (b *batcher) seen(ctx context.Context, sum [32]byte, owner []byte, until, now time.Time) (bool, error) {
	r := &seenReq{ctx: ctx, sum: sum, owner: owner, until: until, now: now, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	var batch []*seenReq
	if b.running < b.max {
		b.running++
		batch = b.take()
	}
	b.mu.Unlock()
	if batch != nil {
		b.run(batch)
		b.next()
	}
	select {
	case <-r.done:
		return r.seen, r.err
	case <-ctx.Done():
		return false, fmt.Errorf("stopped waiting for the shared insert: %w", ctx.Err())
	}
}

// take removes the next batch from the queue; b.mu is held.
func (b *batcher) take() []*seenReq {
	n := min(len(b.queue), batchMax)
	batch := slices.Clone(b.queue[:n])
	b.queue = slices.Delete(b.queue, 0, n)
	return batch
}

// next runs the following batch if calls are queued, or gives the slot up.
func (b *batcher) next() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.running--
		b.mu.Unlock()
		return
	}
	batch := b.take()
	b.mu.Unlock()
	go func() {
		b.run(batch)
		b.next()
	}()
}

// run claims one batch's signatures in one statement and answers each call. A signature twice
// in the batch is a replay of the first; the signatures go in sorted order, so two statements
// that share some wait for each other in one order and never deadlock.
func (b *batcher) run(batch []*seenReq) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	slices.SortStableFunc(batch, func(x, y *seenReq) int { return bytes.Compare(x.sum[:], y.sum[:]) })
	sums := make([][]byte, 0, len(batch))
	owners := make([][]byte, 0, len(batch))
	untils := make([]time.Time, 0, len(batch))
	first := make(map[[32]byte]*seenReq, len(batch))
	var again []*seenReq // the same signature under the same owner: answered as its first
	now := batch[0].now
	for _, r := range batch {
		if f, dup := first[r.sum]; dup {
			if bytes.Equal(f.owner, r.owner) {
				again = append(again, r)
			} else {
				r.seen = true
			}
			continue
		}
		first[r.sum] = r
		sums, owners, untils = append(sums, r.sum[:]), append(owners, r.owner), append(untils, r.until)
		if r.now.After(now) {
			now = r.now
		}
	}
	ctx := batch[0].ctx
	if len(batch) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		defer cancel()
	}
	claimed, err := b.claim(ctx, sums, owners, untils, now)
	for sum, r := range first {
		r.seen, r.err = !claimed[sum], err
	}
	for _, r := range again {
		r.seen, r.err = first[r.sum].seen, err
	}
}

func (b *batcher) claim(ctx context.Context, sums, owners [][]byte, untils []time.Time, now time.Time) (map[[32]byte]bool, error) {
	b.statements.Add(1)
	rows, err := b.pool.Query(ctx, claimSQL, sums, owners, untils, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	claimed := make(map[[32]byte]bool, len(sums))
	for rows.Next() {
		var sig []byte
		if err := rows.Scan(&sig); err != nil {
			return nil, err
		}
		claimed[[32]byte(sig)] = true
	}
	return claimed, rows.Err()
}
