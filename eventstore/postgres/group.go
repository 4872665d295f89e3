package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/eventstore"
)

// Group commit: concurrent Appends of one Store share one transaction, so one commit (one WAL
// flush, one round trip) covers many appends. There is no timer: an append that finds fewer
// than GroupConcurrency groups in flight runs at once, alone if nobody else is waiting, so a
// lone appender pays nothing; appends that arrive while the groups are busy queue, and the next
// group takes the whole queue.
//
// The group's pipeline (one Sync, so one implicit transaction) is the append lock
// (appendLockSQL), then every member's own fast-path statement, with its own expectation and
// its own result. A statement that
// declines (no row: the expectation does not hold, the stream is missing, the revision-order
// guard tripped) wrote nothing and leaves the others alone; that member then takes the slow
// path on its own, after the group commits. A statement that fails (an event id already stored
// aborts the transaction, or a deadlock between two groups) rolls the whole group back, and
// every member takes the slow path on its own: correct, only slower, and rare.

// groupTimeout bounds one group transaction. Members' own contexts cannot cancel a
// transaction others share; they stop waiting for it instead (outcome unknown to them).
const groupTimeout = 30 * time.Second

// groupMaxSize caps the members of one group, so one transaction stays short.
const groupMaxSize = 256

// burstFactor bounds the groups in flight while full groups queue (burst), as a multiple of
// GroupConcurrency.
const burstFactor = 2

// GroupStats counts group commits since the Store was made.
type GroupStats struct {
	// Groups is the number of transactions appends ran in; Appends the appends they carried.
	Groups, Appends int64
	// Fallbacks counts members that had to take the slow path alone because their group was
	// rolled back.
	Fallbacks int64
}

type grouper struct {
	s   *Store
	max int

	mu      sync.Mutex
	queue   []*groupReq
	running int

	groups, appends, fallbacks atomic.Int64
}

type groupReq struct {
	ctx context.Context
	e   encoded
	st  fastStatement
	// claims are taken in the group's transaction with the member's events (AppendMulti of
	// one stream): a claim another owner holds rolls the group back, and every member goes
	// again alone, where that one is refused.
	claims claimSet
	res    eventstore.AppendResult
	ok     bool
	err    error
	done   chan struct{}
}

func (r *groupReq) finish(res eventstore.AppendResult, ok bool, err error) {
	r.res, r.ok, r.err = res, ok, err
	close(r.done)
}

// GroupStats reports the group commits so far.
func (s *Store) GroupStats() GroupStats {
	return GroupStats{Groups: s.group.groups.Load(), Appends: s.group.appends.Load(), Fallbacks: s.group.fallbacks.Load()}
}

// append runs e's fast statement in a group. ok is false when it wrote nothing and the slow
// path must decide; err is set only for failures the slow path would not change.
func (g *grouper) append(ctx context.Context, e encoded, claims claimSet) (eventstore.AppendResult, bool, error) {
	st, _ := fastQuery(e, g.s.payload)
	r := &groupReq{ctx: ctx, e: e, st: st, claims: claims, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, r)
	var batch []*groupReq
	if g.running < g.max || g.burst() {
		g.running++
		batch = g.take()
	}
	g.mu.Unlock()
	if batch != nil {
		g.run(batch)
		g.next()
	}
	select {
	case <-r.done:
		return r.res, r.ok, r.err
	case <-ctx.Done():
		select {
		case <-r.done:
			return r.res, r.ok, r.err
		default:
		}
		return eventstore.AppendResult{}, false, fmt.Errorf("eventstore/postgres: append to %s: stopped waiting for its group commit, outcome unknown: %w", e.stream, ctx.Err())
	}
}

// burst reports whether a full group is queued while every slot is busy, and fewer than
// burstFactor times the slots are: one more group may start then. Steady load rarely queues a
// whole group, so it keeps to GroupConcurrency groups, which measured best for it; a burst
// (ten thousand waits due in one second, docs/performance.md) would otherwise queue behind
// them, and overlapping more groups' commits and round trips writes it sooner. g.mu is held.
func (g *grouper) burst() bool {
	return len(g.queue) >= groupMaxSize && g.running < burstFactor*g.max
}

// take removes the next group from the queue; g.mu is held.
func (g *grouper) take() []*groupReq {
	n := min(len(g.queue), groupMaxSize)
	batch := make([]*groupReq, 0, n)
	for _, r := range g.queue[:n] {
		if err := r.ctx.Err(); err != nil {
			r.finish(eventstore.AppendResult{}, false, fmt.Errorf("eventstore/postgres: append to %s: %w", r.e.stream, err))
			continue
		}
		batch = append(batch, r)
	}
	g.queue = slices.Delete(g.queue, 0, n)
	return batch
}

// next starts the following group if appends are queued, or gives the slot up: a slot beyond
// GroupConcurrency as soon as no full group is queued (the others drain the rest).
func (g *grouper) next() {
	g.mu.Lock()
	if len(g.queue) == 0 || (g.running > g.max && len(g.queue) < groupMaxSize) {
		g.running--
		g.mu.Unlock()
		return
	}
	batch := g.take()
	g.mu.Unlock()
	go func() {
		g.run(batch)
		g.next()
	}()
}

// run commits one group and hands each member its outcome.
func (g *grouper) run(batch []*groupReq) {
	if len(batch) == 0 {
		return
	}
	g.groups.Add(1)
	g.appends.Add(int64(len(batch)))
	ctx, cancel := context.WithTimeout(g.s.ctx, groupTimeout)
	defer cancel()
	if len(batch) == 1 {
		// Alone: in the appender's own context, as without grouping.
		ctx = batch[0].ctx
	}
	parts := make([]encoded, len(batch))
	var claims claimSet
	for i, r := range batch {
		parts[i] = r.e
		claims = claims.with(r.claims)
	}
	// Appends to distinct streams share batched statements; the rest keep their own, sorted by
	// stream (stable: one stream's appends keep their order). batch.go says what that means for
	// lock order.
	plan := planBatches(parts)
	b := &pgx.Batch{}
	g.s.queueAppendLock(b)
	queueBatches(b, parts, plan, g.s.payload)
	for _, i := range plan.rest {
		b.Queue(batch[i].st.sql, batch[i].st.args...)
	}
	claims.queue(b)
	br := g.s.pool.SendBatch(ctx, b)
	res := make([]eventstore.AppendResult, len(batch))
	ok := make([]bool, len(batch))
	failed := readGroup(br, parts, plan, res, ok)
	if failed == nil && !claims.empty() {
		_, failed = br.Exec()
	}
	if err := br.Close(); err != nil && failed == nil {
		failed = err
	}
	if failed == nil {
		for i, r := range batch {
			r.finish(res[i], ok[i], nil)
		}
		return
	}
	var pgErr *pgconn.PgError
	if errors.As(failed, &pgErr) {
		// The server refused a statement or the commit: the group's transaction was rolled
		// back, so nothing of it was written, and each member goes again on its own.
		g.fallbacks.Add(int64(len(batch)))
		for _, r := range batch {
			r.finish(eventstore.AppendResult{}, false, nil)
		}
		return
	}
	// The connection failed: the commit may or may not have happened.
	for _, r := range batch {
		r.finish(eventstore.AppendResult{}, false, fmt.Errorf("eventstore/postgres: append to %s: group commit: %w", r.e.stream, failed))
	}
}

// readGroup reads a group's results: the append lock, the batched statements, then the rest's
// own statements (a declined one returns no row). The first failure ends the reading.
func readGroup(br pgx.BatchResults, parts []encoded, plan batchPlan, res []eventstore.AppendResult, ok []bool) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	if err := readBatches(br, parts, plan, res, ok); err != nil {
		return err
	}
	for _, i := range plan.rest {
		var (
			lastRev  int64
			commit   uint64
			position int64
		)
		err := br.QueryRow().Scan(&lastRev, &commit, &position)
		switch {
		case err == nil:
			res[i] = eventstore.AppendResult{NextRevision: uint64(lastRev), Position: eventstore.Position{Commit: commit, Prepare: uint64(position)}}
			ok[i] = true
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
	}
	return nil
}
