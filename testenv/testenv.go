// Package testenv assembles the service's core for tests that need more than one layer: a
// fresh database with the event store and read models migrated, the command handler, queries,
// and a running projection engine, all torn down when the test ends.
package testenv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/projections"
)

// Env is one test's service core.
type Env struct {
	Pool    *pgxpool.Pool
	DSN     string
	Store   eventstore.Store
	Cmds    *commands.Commands
	Queries *projections.Queries
	Engine  *projections.Engine
}

// New migrates a fresh database and starts the projection engine.
func New(t testing.TB) *Env {
	t.Helper()
	ctx := context.Background()
	dsn := testdb.New(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := projections.Migrate(ctx, pool, projections.All()); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.New(ctx, pool, postgres.Config{CheckPayload: func(raw []byte) error {
		return domain.CheckStorableData("payload", raw) // as the service's store does
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, err := projections.NewEngine(pool, store, projections.All(), projections.EngineConfig{RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Pool: pool, DSN: dsn, Store: store, Cmds: commands.New(store), Queries: projections.NewQueries(pool), Engine: eng}
	Go(t, eng.Run)
	return e
}

// Go runs fn until the test ends, then cancels it and reports its error.
func Go(t testing.TB, fn func(context.Context) error) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("background task: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// Workspace registers an owner and a workspace with paid credits (whole credits).
func (e *Env) Workspace(t testing.TB, credits int64) string {
	t.Helper()
	ctx := context.Background()
	email := fmt.Sprintf("owner-%s@example.com", uuid.NewString()[:8])
	if _, err := e.Cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: "password-123"}); err != nil {
		t.Fatal(err)
	}
	ws, err := e.Cmds.Workspaces.CreateWorkspace(ctx, "ws-"+uuid.NewString()[:8], email)
	if err != nil {
		t.Fatal(err)
	}
	if credits > 0 {
		if _, err := e.Cmds.Billing.TopUp(ctx, ws, billing.FromWhole(credits), ""); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CaughtUp waits until projector name has applied every event of the log it handles.
func (e *Env) CaughtUp(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := e.Engine.Projector(name)
	if err != nil {
		t.Fatal(err)
	}
	last := eventstore.Start
	for {
		evs, err := e.Store.ReadAll(ctx, last, 1000, p.Filter())
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		last = evs[len(evs)-1].Position
	}
	if last.IsStart() {
		return
	}
	if err := e.Engine.WaitFor(ctx, name, last); err != nil {
		t.Fatalf("projector %s did not catch up: %v", name, err)
	}
}

// Querier is what ReadModel reads through: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReadModel reads every projector's tables as sorted JSON rows, by table name: what a
// `projections rebuild` must reproduce row for row.
func ReadModel(t testing.TB, db Querier) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, p := range projections.All() {
		for _, table := range p.Tables() {
			rows, err := db.Query(context.Background(), fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %s t ORDER BY 1`, table))
			if err != nil {
				t.Fatal(err)
			}
			list, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("read %s: %v", table, err)
			}
			out[table] = list
		}
	}
	return out
}

// ReadModelDiff describes how after differs from before, table by table (row counts and the
// first rows of each side that the other lacks); nil when they are equal.
func ReadModelDiff(before, after map[string][]string) []string {
	var diffs []string
	tables := slices.Sorted(maps.Keys(before))
	for table := range after {
		if _, ok := before[table]; !ok {
			tables = append(tables, table)
		}
	}
	for _, table := range tables {
		b, a := before[table], after[table]
		if slices.Equal(b, a) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("table %s: %d rows before, %d after; only before: %s; only after: %s",
			table, len(b), len(a), firstMissing(b, a), firstMissing(a, b)))
	}
	return diffs
}

// firstMissing lists up to three rows of rows that are not in other.
func firstMissing(rows, other []string) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(other, r) {
			out = append(out, r)
			if len(out) == 3 {
				break
			}
		}
	}
	return out
}

// Commits returns the distinct transactions that wrote events to streams: how many commits
// something took.
func (e *Env) Commits(t testing.TB, streams ...string) []int64 {
	t.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT DISTINCT tx_id::text::bigint FROM events WHERE stream = ANY($1)`, streams)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
