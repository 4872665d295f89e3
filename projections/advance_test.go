package projections

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/testdb"
)

// positions is a projector that records the position of every event it is given in a table
// whose key refuses a second application, and what the batch's transaction runs with.
type positions struct {
	syncCommit []string // synchronous_commit as each batch saw it
}

func (*positions) Name() string              { return "test_positions" }
func (*positions) Filter() eventstore.Filter { return eventstore.Filter{} }
func (*positions) Tables() []string          { return []string{"test_positions"} }
func (*positions) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS test_positions (pos bigint PRIMARY KEY)`)
	return err
}

// Apply records ev; a "Poison" event makes the batch fail after its other writes were queued.
func (p *positions) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	tx.Exec(`INSERT INTO test_positions (pos) VALUES ($1)`, int64(ev.Position.Prepare))
	if ev.Type == "Poison" {
		tx.Exec(`SELECT 1 / 0`)
	}
	// A read in the middle of the batch: the transaction spans more than one flush.
	var sc string
	if err := tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&sc); err != nil {
		return err
	}
	p.syncCommit = append(p.syncCommit, sc)
	return nil
}

func positionEvents(n int) []eventstore.RecordedEvent {
	out := make([]eventstore.RecordedEvent, n)
	for i := range out {
		out[i] = eventstore.RecordedEvent{Type: "Counted", Position: eventstore.Position{Commit: uint64(i + 1), Prepare: uint64(i + 1)}}
	}
	return out
}

func newPositionsEngine(t *testing.T, pool *pgxpool.Pool, p *positions) *Engine {
	t.Helper()
	if err := Migrate(context.Background(), pool, []Projector{p}); err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(pool, nil, []Projector{p}, EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// applied lists the recorded positions and reads the checkpoint.
func applied(t *testing.T, pool *pgxpool.Pool) ([]int64, int64, int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT pos FROM test_positions ORDER BY pos`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	var at, n int64
	if err := pool.QueryRow(ctx, `SELECT commit_pos, events_applied FROM projection_checkpoints WHERE name = 'test_positions'`).Scan(&at, &n); err != nil {
		t.Fatal(err)
	}
	return got, at, n
}

func wantApplied(t *testing.T, pool *pgxpool.Pool, upTo int64) {
	t.Helper()
	got, at, n := applied(t, pool)
	want := make([]int64, upTo)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(got, want) || at != upTo || n != upTo {
		t.Fatalf("applied %v, checkpoint at %d after %d events; want 1..%d once each, checkpoint at %d", got, at, n, upTo, upTo)
	}
}

func TestBatchInOneRoundTripMovesCheckpointFromWhereItWas(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	p := &positions{}
	e := newPositionsEngine(t, pool, p)
	evs := positionEvents(10)

	if err := e.applyMessage(ctx, p, evs[:3]); err != nil {
		t.Fatal(err)
	}
	wantApplied(t, pool, 3)
	cp, ok := e.checkpoints.Load(p.Name())
	if !ok || cp.(eventstore.Position) != evs[2].Position {
		t.Fatalf("after a committed batch the engine knows checkpoint %v (%v), want %v", cp, ok, evs[2].Position)
	}

	// From the known checkpoint: what was applied is skipped, the rest lands with the checkpoint.
	if err := e.applyAt(ctx, p, evs[:6], evs[2].Position); err != nil {
		t.Fatal(err)
	}
	wantApplied(t, pool, 6)

	// From a checkpoint that has moved on: refused, nothing written.
	err := e.applyAt(ctx, p, evs[:8], evs[2].Position)
	if !checkpointMoved(err) {
		t.Fatalf("batch from a stale checkpoint: %v, want the checkpoint-moved error", err)
	}
	wantApplied(t, pool, 6)

	// A failing write fails the whole batch, its checkpoint included.
	poisoned := slices.Clone(evs[:8])
	poisoned[7].Type = "Poison"
	if err := e.applyAt(ctx, p, poisoned, evs[5].Position); err == nil || checkpointMoved(err) {
		t.Fatalf("poisoned batch: %v, want the write's error", err)
	}
	wantApplied(t, pool, 6)

	// The pool's connections are left fit for the next batch.
	for range 3 {
		if err := e.applyMessage(ctx, p, evs); err != nil {
			t.Fatal(err)
		}
	}
	wantApplied(t, pool, 10)
	for i, sc := range p.syncCommit {
		if sc != "off" {
			t.Fatalf("batch write %d ran with synchronous_commit %q, want off", i, sc)
		}
	}
}

func TestBatchAfterAnotherInstanceMovedTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	p := &positions{}
	a, b := newPositionsEngine(t, pool, p), newPositionsEngine(t, pool, p)
	evs := positionEvents(8)

	if err := a.applyMessage(ctx, p, evs[:2]); err != nil {
		t.Fatal(err)
	}
	// Leadership moved: the other instance applies on from the checkpoint it reads.
	if err := b.applyMessage(ctx, p, evs[:5]); err != nil {
		t.Fatal(err)
	}
	wantApplied(t, pool, 5)
	// Back on the first instance, whose known checkpoint is stale: each event still once.
	if err := a.applyMessage(ctx, p, evs); err != nil {
		t.Fatalf("batch after the checkpoint moved elsewhere: %v", err)
	}
	wantApplied(t, pool, 8)
	if cp, _ := a.checkpoints.Load(p.Name()); cp.(eventstore.Position) != evs[7].Position {
		t.Fatalf("known checkpoint %v, want %v", cp, evs[7].Position)
	}
	if err := a.applyAt(ctx, p, evs, evs[7].Position); err != nil {
		t.Fatalf("nothing left to apply: %v", err)
	}
	wantApplied(t, pool, 8)
}
