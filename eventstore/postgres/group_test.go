package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/eventstore"
)

// groupAppend is one append of a group test and its outcome.
type groupAppend struct {
	stream   string
	expected eventstore.ExpectedRevision
	ev       eventstore.EventData
	// claims, when set, go with the append through AppendMulti.
	claims []eventstore.Claim
	res    eventstore.AppendResult
	err    error
}

// holdOnlySlot has a lone append to a stream whose row lock tx holds take the store's only
// group slot (GroupConcurrency 1), where it waits until tx ends; wg ends with that append.
func holdOnlySlot(t *testing.T, st *Store, wg *sync.WaitGroup) pgx.Tx {
	t.Helper()
	ctx := testCtx(t)
	blocker := "blocker-" + uuid.NewString()
	if _, err := st.Append(ctx, blocker, eventstore.NoStream(), event("Seeded")); err != nil {
		t.Fatal(err)
	}
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1 FROM streams WHERE name = $1 FOR UPDATE`, blocker); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if _, err := st.Append(ctx, blocker, eventstore.Any(), event("Blocked")); err != nil {
			t.Errorf("blocked append: %v", err)
		}
	})
	pollUntil(t, "the blocked append holds the only group slot", func() bool {
		st.group.mu.Lock()
		defer st.group.mu.Unlock()
		return st.group.running == 1 && len(st.group.queue) == 0
	})
	return tx
}

// inOneGroup runs appends as one group: it holds the first group (holdOnlySlot) until every
// append is queued behind it, then lets go.
func inOneGroup(t *testing.T, st *Store, appends []*groupAppend) {
	t.Helper()
	ctx := testCtx(t)
	var wg sync.WaitGroup
	tx := holdOnlySlot(t, st, &wg)
	for _, a := range appends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a.claims == nil {
				a.res, a.err = st.Append(ctx, a.stream, a.expected, a.ev)
				return
			}
			var res []eventstore.AppendResult
			res, a.err = st.AppendMulti(ctx, eventstore.StreamAppend{Stream: a.stream, Expected: a.expected, Events: []eventstore.EventData{a.ev}, Claims: a.claims})
			if a.err == nil {
				a.res = res[0]
			}
		}()
	}
	pollUntil(t, "every append queued behind the blocked group", func() bool {
		st.group.mu.Lock()
		defer st.group.mu.Unlock()
		return len(st.group.queue) == len(appends)
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommit checks that queued appends share one transaction and still each get their
// own result: the failing ones fail alone, the others commit together.
func TestGroupCommit(t *testing.T) {
	pool, _ := newMigratedDB(t, 16)
	st := newStore(t, pool, Config{GroupConcurrency: 1})
	ctx := testCtx(t)
	seeded := "seeded-" + uuid.NewString()
	if _, err := st.Append(ctx, seeded, eventstore.NoStream(), event("Seeded")); err != nil {
		t.Fatal(err)
	}
	var fresh, moved, refused []*groupAppend
	for range 10 {
		fresh = append(fresh, &groupAppend{stream: "fresh-" + uuid.NewString(), expected: eventstore.NoStream(), ev: event("Grouped")})
	}
	for _, exp := range []eventstore.ExpectedRevision{eventstore.NoStream(), eventstore.Exact(5), eventstore.Exact(3)} {
		refused = append(refused, &groupAppend{stream: seeded, expected: exp, ev: event("Refused")})
	}
	// Streams that each appear once in the group share the batched statements (batch.go):
	// refusals there must leave their neighbours in the same statement alone too.
	for _, exp := range []eventstore.ExpectedRevision{eventstore.NoStream(), eventstore.Exact(0), eventstore.Exact(7)} {
		own := "seeded-" + uuid.NewString()
		if _, err := st.Append(ctx, own, eventstore.NoStream(), event("Seeded"), event("Seeded")); err != nil {
			t.Fatal(err)
		}
		refused = append(refused, &groupAppend{stream: own, expected: exp, ev: event("Refused")})
	}
	refused = append(refused, &groupAppend{stream: "missing-" + uuid.NewString(), expected: eventstore.StreamExists(), ev: event("Refused")})
	for _, exp := range []eventstore.ExpectedRevision{eventstore.Exact(0), eventstore.StreamExists(), eventstore.Exact(0)} {
		own := "seeded-" + uuid.NewString()
		if _, err := st.Append(ctx, own, eventstore.NoStream(), event("Seeded")); err != nil {
			t.Fatal(err)
		}
		moved = append(moved, &groupAppend{stream: own, expected: exp, ev: event("Grouped")})
	}
	before := st.GroupStats()
	inOneGroup(t, st, slices.Concat(fresh, moved, refused))
	after := st.GroupStats()

	commit := fresh[0].res.Position.Commit
	for _, a := range moved {
		if a.err != nil {
			t.Fatalf("append expecting %s on %s beside refused neighbours: %v", a.expected, a.stream, a.err)
		}
		if a.res.Position.Commit != commit || a.res.NextRevision != 1 {
			t.Errorf("append to %s: %+v, want revision 1 in transaction %d", a.stream, a.res, commit)
		}
		got, err := st.ReadStream(ctx, a.stream, 0, 10)
		if err != nil || len(got) != 2 || got[1].ID != a.ev.ID || got[1].Revision != 1 || got[1].Position != a.res.Position {
			t.Errorf("stream %s holds %v (%v), want its seed then its own event at %s", a.stream, got, err, a.res.Position)
		}
	}
	for _, a := range fresh {
		if a.err != nil {
			t.Fatalf("append to %s beside refused neighbours: %v", a.stream, a.err)
		}
		if a.res.Position.Commit != commit {
			t.Errorf("append to %s committed in transaction %d, its group in %d: not one transaction", a.stream, a.res.Position.Commit, commit)
		}
		got, err := st.ReadStream(ctx, a.stream, 0, 10)
		if err != nil || len(got) != 1 || got[0].ID != a.ev.ID || got[0].Position != a.res.Position {
			t.Errorf("stream %s holds %v (%v), want its own event at %s", a.stream, got, err, a.res.Position)
		}
	}
	for _, a := range refused {
		if !errors.Is(a.err, eventstore.ErrWrongExpectedVersion) {
			t.Errorf("append expecting %s on %s: %v, want ErrWrongExpectedVersion", a.expected, a.stream, a.err)
		}
	}
	for _, a := range refused {
		if got, _ := st.ReadStream(ctx, a.stream, 0, 10); slices.ContainsFunc(got, func(ev eventstore.RecordedEvent) bool { return ev.Type == "Refused" }) {
			t.Errorf("%s holds a refused event: %v", a.stream, got)
		}
	}
	if g := after.Groups - before.Groups; g != 3 {
		t.Errorf("%d groups ran, want 3 (the blocker's seed, the blocked append, then all the queued ones)", g)
	}
	if after.Fallbacks != before.Fallbacks {
		t.Errorf("%d appends fell back, want none", after.Fallbacks-before.Fallbacks)
	}
}

// TestGroupCommitRolledBackFallsBack: an event id already stored aborts the group's
// transaction, whether it sits in an append's own statement (Any) or in a batched one
// (NoStream); every member then goes again on its own and gets its own answer.
func TestGroupCommitRolledBackFallsBack(t *testing.T) {
	for _, expected := range []eventstore.ExpectedRevision{eventstore.Any(), eventstore.NoStream()} {
		t.Run(expected.String(), func(t *testing.T) { groupRolledBack(t, expected) })
	}
}

func groupRolledBack(t *testing.T, expected eventstore.ExpectedRevision) {
	pool, _ := newMigratedDB(t, 16)
	st := newStore(t, pool, Config{GroupConcurrency: 1})
	ctx := testCtx(t)
	stored := event("Stored")
	if _, err := st.Append(ctx, "seeded-"+uuid.NewString(), eventstore.NoStream(), stored); err != nil {
		t.Fatal(err)
	}
	var fresh []*groupAppend
	for range 5 {
		fresh = append(fresh, &groupAppend{stream: "fresh-" + uuid.NewString(), expected: expected, ev: event("Grouped")})
	}
	clash := &groupAppend{stream: "fresh-" + uuid.NewString(), expected: expected, ev: stored}
	before := st.GroupStats()
	inOneGroup(t, st, append(append([]*groupAppend{}, fresh...), clash))
	after := st.GroupStats()
	for _, a := range fresh {
		if a.err != nil {
			t.Errorf("append to %s beside a clashing id: %v", a.stream, a.err)
		}
		if got, err := st.ReadStream(ctx, a.stream, 0, 10); err != nil || len(got) != 1 || got[0].ID != a.ev.ID {
			t.Errorf("stream %s holds %v (%v), want its own event", a.stream, got, err)
		}
	}
	if !errors.Is(clash.err, eventstore.ErrIdempotencyConflict) {
		t.Errorf("append reusing a stored id in another stream: %v, want ErrIdempotencyConflict", clash.err)
	}
	if n := after.Fallbacks - before.Fallbacks; n != int64(len(fresh)+1) {
		t.Errorf("%d appends fell back, want %d (the whole group)", n, len(fresh)+1)
	}
}

// TestClaimsShareAGroupCommit: one stream's AppendMulti with claims (a submit and its
// request's signature) joins a group commit, its claims taken in the group's transaction. A
// claim another owner holds rolls the group back; every member goes again alone, and only
// the append carrying that claim is refused, with nothing of it written.
func TestClaimsShareAGroupCommit(t *testing.T) {
	pool, _ := newMigratedDB(t, 16)
	st := newStore(t, pool, Config{GroupConcurrency: 1})
	ctx := testCtx(t)
	claim := func() eventstore.Claim {
		return eventstore.Claim{Key: []byte(uuid.NewString()), Owner: []byte(uuid.NewString()), Until: time.Now().Add(time.Hour)}
	}
	claimed := func() []eventstore.Claim { return []eventstore.Claim{claim()} }
	var members []*groupAppend
	for range 4 {
		a := &groupAppend{stream: "submit-" + uuid.NewString(), expected: eventstore.NoStream(), ev: event("Submitted")}
		a.claims = claimed()
		members = append(members, a)
	}
	plain := &groupAppend{stream: "plain-" + uuid.NewString(), expected: eventstore.NoStream(), ev: event("Plain")}
	before := st.GroupStats()
	inOneGroup(t, st, append(slices.Clone(members), plain))
	after := st.GroupStats()
	for _, a := range append(slices.Clone(members), plain) {
		if a.err != nil || a.res.Position.Commit != plain.res.Position.Commit {
			t.Fatalf("append to %s: %+v, %v; want it in the group's transaction %d", a.stream, a.res, a.err, plain.res.Position.Commit)
		}
	}
	for _, a := range members {
		var owner []byte
		if err := pool.QueryRow(ctx, `SELECT owner FROM `+ClaimsTable+` WHERE key = $1`, a.claims[0].Key).Scan(&owner); err != nil || string(owner) != string(a.claims[0].Owner) {
			t.Fatalf("claim of %s: owner %q (%v), want %q", a.stream, owner, err, a.claims[0].Owner)
		}
	}
	if g := after.Groups - before.Groups; g != 3 || after.Fallbacks != before.Fallbacks {
		t.Fatalf("%d groups, %d fallbacks; want 3 groups (blocker, blocked, the queued ones) and none", g, after.Fallbacks-before.Fallbacks)
	}

	// A replay: its claim's key is held by the first request's owner.
	held := claim()
	if _, err := st.AppendMulti(ctx, eventstore.StreamAppend{Stream: "first-" + uuid.NewString(), Expected: eventstore.NoStream(),
		Events: []eventstore.EventData{event("First")}, Claims: []eventstore.Claim{held}}); err != nil {
		t.Fatal(err)
	}
	replay := &groupAppend{stream: "replay-" + uuid.NewString(), expected: eventstore.NoStream(), ev: event("Replayed"),
		claims: []eventstore.Claim{{Key: held.Key, Owner: []byte("another owner"), Until: held.Until}}}
	others := []*groupAppend{{stream: "other-" + uuid.NewString(), expected: eventstore.NoStream(), ev: event("Other")}}
	others[0].claims = claimed()
	before = st.GroupStats()
	inOneGroup(t, st, []*groupAppend{others[0], replay})
	after = st.GroupStats()
	var ce *eventstore.ClaimedError
	if !errors.As(replay.err, &ce) || !ce.Refuses(replay.claims[0]) {
		t.Fatalf("the replay's append: %v, want a ClaimedError refusing its claim", replay.err)
	}
	if got, _ := st.ReadStream(ctx, replay.stream, 0, 10); len(got) != 0 {
		t.Fatalf("the refused append wrote %v", got)
	}
	if others[0].err != nil {
		t.Fatalf("an append beside the replay: %v", others[0].err)
	}
	if n := after.Fallbacks - before.Fallbacks; n != 2 {
		t.Fatalf("%d appends fell back, want 2 (the whole group)", n)
	}
}

// TestMetrics: a Store given a Registerer reports its group commits and log tail.
func TestMetrics(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	reg := prometheus.NewRegistry()
	st := newStore(t, pool, Config{Registerer: reg})
	ctx := testCtx(t)
	sub := tailSubscription(t, ctx, st)
	if _, err := st.Append(ctx, "metrics-1", eventstore.NoStream(), event("Counted")); err != nil {
		t.Fatal(err)
	}
	receive(t, sub, 1)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		got[f.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	for name, least := range map[string]float64{
		"switchyard_eventstore_group_commits_total": 1,
		"switchyard_eventstore_group_appends_total": 1,
		"switchyard_eventstore_log_reads_total":     1,
		"switchyard_eventstore_tail_members":        1,
	} {
		if got[name] < least {
			t.Errorf("%s = %v, want at least %v (gathered %v)", name, got[name], least, got)
		}
	}
	if _, ok := got["switchyard_eventstore_group_fallbacks_total"]; !ok {
		t.Errorf("switchyard_eventstore_group_fallbacks_total not exposed (gathered %v)", got)
	}
}

// TestAFullQueueStartsAnotherGroup: with every slot held by a group that cannot commit, a whole
// group's worth of queued appends starts one more group (a burst), which commits meanwhile; what
// is queued beyond it waits for a slot as before.
func TestAFullQueueStartsAnotherGroup(t *testing.T) {
	pool, _ := newMigratedDB(t, 16)
	st := newStore(t, pool, Config{GroupConcurrency: 1})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	tx := holdOnlySlot(t, st, &wg)
	const extra = 10
	var done sync.WaitGroup
	var failed sync.Map
	for i := range groupMaxSize + extra {
		done.Add(1)
		wg.Go(func() {
			defer done.Done()
			if _, err := st.Append(ctx, "burst-"+uuid.NewString(), eventstore.NoStream(), event("Burst")); err != nil {
				failed.Store(i, err)
			}
		})
	}
	var committed int
	pollUntil(t, "a whole group committed while the only slot is held", func() bool {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = 'Burst'`).Scan(&committed); err != nil {
			t.Fatal(err)
		}
		return committed == groupMaxSize
	})
	pollUntil(t, "the rest queued for a slot", func() bool {
		st.group.mu.Lock()
		defer st.group.mu.Unlock()
		return len(st.group.queue) == extra
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	done.Wait()
	wg.Wait()
	failed.Range(func(i, err any) bool {
		t.Errorf("append %v: %v", i, err)
		return true
	})
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = 'Burst'`).Scan(&committed); err != nil || committed != groupMaxSize+extra {
		t.Errorf("%d appends committed (%v), want %d", committed, err, groupMaxSize+extra)
	}
	pollUntil(t, "every slot given up once the queue drained", func() bool {
		st.group.mu.Lock()
		defer st.group.mu.Unlock()
		return st.group.running == 0
	})
}
