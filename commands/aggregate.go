package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/decoded"
)

// eventIDNamespace derives deterministic event ids from idempotency keys.
var eventIDNamespace = uuid.MustParse("6f1c3f4e-3c1a-4d43-9a57-0d5b7c1e2f10")

// readBatch is how many events one ReadStream call fetches while folding.
const readBatch = 1000

// aggregate describes how to fold one kind of stream.
type aggregate[S any] struct {
	zero   S
	evolve func(S, domain.Event) S
	// clone, when set, copies a cached state before it is evolved further: for states that
	// evolve in place (a run's thousands of stages), so the cached copy is never changed.
	clone func(S) S
	// sharesEvents lets fold take its events from the process's decoded ones
	// (internal/decoded), which the log tail's consumers share: for states that keep nothing
	// of an event that can change (no slice or map from it). A busy account on two instances
	// is read on by every turn and balance check and by the tail, each decoding the other
	// instance's charges anew (docs/performance.md, "Decoded once on two instances").
	sharesEvents bool
}

// loaded is a folded stream and the revision it was folded to.
type loaded[S any] struct {
	state    S
	revision uint64
	exists   bool
}

// at reports the revision the state was folded to, and whether the stream exists: the cache
// orders the states of one stream by it (stateCache.put).
func (l loaded[S]) at() (uint64, bool) { return l.revision, l.exists }

// revisioned is a cached state that knows its revision.
type revisioned interface{ at() (uint64, bool) }

// older reports that v is a state of an earlier revision than have.
func older(v, have any) bool {
	nv, ok1 := v.(revisioned)
	hv, ok2 := have.(revisioned)
	if !ok1 || !ok2 {
		return false
	}
	nr, nexists := nv.at()
	hr, hexists := hv.at()
	return hexists && (!nexists || nr < hr)
}

func (l loaded[S]) expected() eventstore.ExpectedRevision {
	if !l.exists {
		return eventstore.NoStream()
	}
	return eventstore.Exact(l.revision)
}

// load folds stream, reading only the events after a cached state when there is one: streams
// such as a busy workspace's billing account grow long, and events never change once written.
func load[S any](ctx context.Context, on handler, stream string, agg aggregate[S]) (loaded[S], error) {
	h := on.base()
	cur, from, shared := cachedState(h, stream, agg)
	for {
		events, err := h.store.ReadStream(ctx, stream, from, readBatch)
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return loaded[S]{state: agg.zero}, nil
		}
		if err != nil {
			return cur, fmt.Errorf("read %s: %w", stream, err)
		}
		if cur, shared, err = fold(cur, shared, agg, stream, events); err != nil {
			return cur, err
		}
		if len(events) < readBatch {
			break
		}
		from = cur.revision + 1
	}
	return remember(h, stream, agg, cur), nil
}

// loadFrom is load when stream's events after cur (the state cachedState gave, shared with
// the cache) have been read already.
func loadFrom[S any](on handler, stream string, agg aggregate[S], cur loaded[S], events []eventstore.RecordedEvent) (loaded[S], error) {
	h := on.base()
	cur, _, err := fold(cur, true, agg, stream, events)
	if err != nil {
		return cur, err
	}
	return remember(h, stream, agg, cur), nil
}

// cachedState is stream's cached state (shared with the cache) and the revision to read on
// from, or the zero state and revision 0.
func cachedState[S any](on handler, stream string, agg aggregate[S]) (cur loaded[S], from uint64, shared bool) {
	h := on.base()
	if c, ok := h.cache.get(stream); ok {
		if l, ok := c.(loaded[S]); ok {
			return l, l.revision + 1, true
		}
	}
	return loaded[S]{state: agg.zero}, 0, false
}

// cachedAt is stream's cached state when the cache holds it at revision or later (a copy the
// caller may evolve): events never change once written, so it holds everything up to revision.
func cachedAt[S any](on handler, stream string, agg aggregate[S], revision uint64) (S, bool) {
	cur, _, shared := cachedState(on, stream, agg)
	if !shared || !cur.exists || cur.revision < revision {
		return agg.zero, false
	}
	if agg.clone != nil {
		cur.state = agg.clone(cur.state)
	}
	return cur.state, true
}

// fold evolves cur by stream's records, cloning a state shared with the cache first.
func fold[S any](cur loaded[S], shared bool, agg aggregate[S], stream string, records []eventstore.RecordedEvent) (loaded[S], bool, error) {
	if shared && len(records) > 0 && agg.clone != nil {
		cur.state, shared = agg.clone(cur.state), false
	}
	decode := decodeOwn
	if agg.sharesEvents {
		decode = decoded.Event
	}
	for _, rec := range records {
		ev, err := decode(rec)
		if err != nil {
			return cur, shared, fmt.Errorf("fold %s@%d: %w", stream, rec.Revision, err)
		}
		cur.state = agg.evolve(cur.state, ev)
		cur.revision, cur.exists = rec.Revision, true
	}
	return cur, shared, nil
}

// decodeOwn decodes rec into an event of the caller's own.
func decodeOwn(rec eventstore.RecordedEvent) (domain.Event, error) {
	return domain.Events.Decode(rec.Type, rec.Data)
}

// remember caches a folded stream and returns a state the caller may evolve.
func remember[S any](on handler, stream string, agg aggregate[S], cur loaded[S]) loaded[S] {
	h := on.base()
	if cur.exists {
		h.cache.put(stream, cur)
		if agg.clone != nil {
			cur.state = agg.clone(cur.state) // the caller may evolve what it gets
		}
	}
	return cur
}

// execute loads stream, decides, and appends at the revision read, deciding again on conflict.
func execute[S any](ctx context.Context, on handler, stream string, agg aggregate[S], decide func(S) ([]domain.Event, error)) (Result, error) {
	_, res, err := executeFold(ctx, on, stream, agg, decide)
	return res, err
}

// executeFold is execute that also returns the state after the append (or as read, when the
// decision was to append nothing). The state is shared with the cache: read it or Evolve it
// (which copies), never Apply to it.
func executeFold[S any](ctx context.Context, on handler, stream string, agg aggregate[S], decide func(S) ([]domain.Event, error)) (S, Result, error) {
	return executeFrom(ctx, on, stream, agg, nil, decide)
}

// executeCached is executeFold deciding first on the state of stream this process last saw,
// without reading on from it: its cached state, or no stream when none is cached. Events so
// decided are appended expecting that revision, so they are written only if it was current
// (otherwise the stream is read and the decision taken again, as on any conflict). A decision
// to write nothing, or an error, may be the staleness talking: it is taken again on the
// stream as read. It saves a read's round trip for streams this process nearly always writes
// itself: a run's, which the scheduler steps, or a new one.
func executeCached[S any](ctx context.Context, on handler, stream string, agg aggregate[S], decide func(S) ([]domain.Event, error)) (S, Result, error) {
	cur, _, shared := cachedState(on, stream, agg)
	if shared && agg.clone != nil {
		cur.state = agg.clone(cur.state) // executeFrom evolves what was decided on
	}
	events, err := decide(cur.state)
	if err != nil || len(events) == 0 {
		return executeFold(ctx, on, stream, agg, decide)
	}
	first := true
	return executeFrom(ctx, on, stream, agg, &cur, func(s S) ([]domain.Event, error) {
		if first {
			first = false
			return events, nil
		}
		return decide(s)
	})
}

// executeFrom is executeFold deciding first on read, a state of stream the caller has just
// loaded (nil: load it), so a use case that read the stream to check something does not read
// it twice; a conflict loads it again, as any stale state does.
func executeFrom[S any](ctx context.Context, on handler, stream string, agg aggregate[S], read *loaded[S], decide func(S) ([]domain.Event, error)) (S, Result, error) {
	h := on.base()
	for attempt := 0; ; attempt++ {
		var cur loaded[S]
		var err error
		if attempt == 0 && read != nil {
			cur = *read
		} else if cur, err = load(ctx, h, stream, agg); err != nil {
			return agg.zero, Result{}, err
		}
		events, err := decide(cur.state)
		if err != nil {
			return agg.zero, Result{}, err
		}
		if len(events) == 0 {
			return cur.state, Result{Stream: stream, Revision: cur.revision}, nil
		}
		res, err := appendEvents(ctx, h, stream, cur.expected(), events)
		if isConflict(err) && attempt < maxConflictRetries {
			continue // load reads on from the cached state: events never change once written
		}
		if err != nil {
			return agg.zero, Result{}, err
		}
		next := cur
		for _, e := range events {
			next.state = agg.evolve(next.state, e)
		}
		next.revision, next.exists = res.Revision, true
		h.cache.put(stream, next)
		return next.state, res, nil
	}
}

// appendEvents encodes and appends events, giving identified events their derived ids.
func appendEvents(ctx context.Context, on handler, stream string, expected eventstore.ExpectedRevision, events []domain.Event) (Result, error) {
	h := on.base()
	data, err := encodeEvents(ctx, events)
	if err != nil {
		return Result{}, err
	}
	res, err := h.store.Append(ctx, stream, expected, data...)
	if err != nil {
		return Result{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	return Result{Stream: stream, Revision: res.NextRevision, Position: res.Position, Appended: true}, nil
}

// encodeEvents encodes events for an append, with ctx's metadata and derived ids.
func encodeEvents(ctx context.Context, events []domain.Event) ([]eventstore.EventData, error) {
	data := make([]eventstore.EventData, 0, len(events))
	meta := metadataFrom(ctx)
	for _, e := range events {
		b, err := domain.Encode(e)
		if err != nil {
			return nil, err
		}
		data = append(data, eventstore.EventData{ID: eventID(e), Type: e.EventType(), Data: b, Metadata: meta})
	}
	return data, nil
}

func eventID(e domain.Event) uuid.UUID {
	if id, ok := e.(domain.Identified); ok {
		if key := id.IdempotencyKey(); key != "" {
			return uuid.NewSHA1(eventIDNamespace, []byte(key))
		}
	}
	return newID()
}

// newID returns a new time-ordered identifier (UUIDv7) for events, executions and runs. Each
// is a key of B-tree indexes (the events' IDs and streams, the streams, the read models): a
// random ID sends each insert to a random page, which after every checkpoint is written to
// the WAL whole, so the log's bytes per call grew with the database (docs/performance.md);
// an ID that grows with time inserts at each index's right edge.
func newID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// stateCache keeps recently used aggregates, at most max of them. It is an approximate LRU in
// two generations: entries go into the young map; when it holds max/2 the old map is dropped
// and the young one takes its place, and a hit in the old map moves the entry back to the
// young one. So what is in use (a busy workspace's billing account, executions in flight)
// stays, and what went quiet longest goes, at O(1) per call.
type stateCache struct {
	mu         sync.Mutex
	max        int
	young, old map[string]any
}

// stateCaches is a process's state cache: one stateCache for most streams, and one of their own
// for the categories given one. Cache windows have theirs: a window is small and consulted on
// every call of a cacheable module, and a process that has forgotten an open window guesses it
// closed, runs the call, and has its commit refused. Sharing the executions' cache, 2,048
// distinct calls in flight pushed their own windows out, and identical calls then ran at a
// tenth of the speed of the first ones.
type stateCaches struct {
	shared *stateCache
	own    map[string]*stateCache // by category
}

// newStateCaches returns a cache of size states, and of sizes[c] more for each category c.
func newStateCaches(size int, sizes map[string]int) *stateCaches {
	c := &stateCaches{shared: newStateCache(size), own: map[string]*stateCache{}}
	for category, n := range sizes {
		c.own[category] = newStateCache(n)
	}
	return c
}

// of is the cache that keeps stream.
func (c *stateCaches) of(stream string) *stateCache {
	if own, ok := c.own[eventstore.Category(stream)]; ok {
		return own
	}
	return c.shared
}

func (c *stateCaches) get(stream string) (any, bool)  { return c.of(stream).get(stream) }
func (c *stateCaches) put(stream string, v any)       { c.of(stream).put(stream, v) }
func (c *stateCaches) take(stream string) (any, bool) { return c.of(stream).take(stream) }
func (c *stateCaches) drop(stream string)             { c.of(stream).drop(stream) }

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, young: map[string]any{}, old: map[string]any{}}
}

func (c *stateCache) get(stream string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.young[stream]; ok {
		return v, true
	}
	v, ok := c.old[stream]
	if ok {
		delete(c.old, stream)
		c.putLocked(stream, v)
	}
	return v, ok
}

// put caches v for stream, unless the cache holds a later revision of it: a read that began
// before an append of this process and ends after it must not take the cache back to before
// that append. (A balance read for the advisory check racing a charge batch did, about once a
// second: the next batch was then refused on revision, and the process took turns on its own
// account for contendedFor as if another instance charged it.)
func (c *stateCache) put(stream string, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	have, ok := c.young[stream]
	if !ok {
		have, ok = c.old[stream]
	}
	if ok && older(v, have) {
		v = have
	}
	delete(c.old, stream)
	c.putLocked(stream, v)
}

func (c *stateCache) putLocked(stream string, v any) {
	if _, ok := c.young[stream]; !ok && len(c.young) >= max(c.max/2, 1) {
		c.old, c.young = c.young, make(map[string]any, len(c.young))
	}
	c.young[stream] = v
}

// take removes stream's state from the cache and returns it.
func (c *stateCache) take(stream string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.young[stream]
	if !ok {
		v, ok = c.old[stream]
	}
	delete(c.young, stream)
	delete(c.old, stream)
	return v, ok
}

func (c *stateCache) drop(stream string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.young, stream)
	delete(c.old, stream)
}
