package projections_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/projections"
)

// benchRebuildEventsEnv sets how many billing events BenchmarkRebuildBilling loads. The default
// keeps `go test -bench .` quick; the figure in docs/performance.md is for 1,000,000.
const benchRebuildEventsEnv = "SWITCHYARD_BENCH_REBUILD_EVENTS"

// benchWorkspaces is how many billing streams the events are spread over.
const benchWorkspaces = 1000

// BenchmarkRebuildBilling measures `projections rebuild billing` (Engine.Rebuild: replay the
// whole log into shadow tables, then swap them in) over a log of billing events, in events/s.
//
//	go test ./projections -run '^$' -bench BenchmarkRebuildBilling
//	SWITCHYARD_BENCH_REBUILD_EVENTS=1000000 go test ./projections -run '^$' -bench BenchmarkRebuildBilling -timeout 30m
func BenchmarkRebuildBilling(b *testing.B) {
	n := 100_000
	if s := os.Getenv(benchRebuildEventsEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < benchWorkspaces {
			b.Fatalf("%s=%q: want a whole number of at least %d", benchRebuildEventsEnv, s, benchWorkspaces)
		}
		n = v
	}
	ctx := context.Background()
	pool, _ := testdb.NewPool(b)
	if err := postgres.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	if err := projections.Migrate(ctx, pool, projections.All()); err != nil {
		b.Fatal(err)
	}
	store, err := postgres.New(ctx, pool, postgres.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })

	loadStart := time.Now()
	preloadBilling(b, pool, n)
	waitVisible(b, pool, store, n)
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE events"); err != nil {
		b.Fatalf("vacuum: %v", err)
	}
	b.Logf("loaded %d billing events over %d workspaces in %s", n, benchWorkspaces, time.Since(loadStart).Round(time.Millisecond))

	eng, err := projections.NewEngine(pool, store, projections.All(), projections.EngineConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
		start := time.Now()
		for range b.N {
			var applied int64
			err := eng.Rebuild(ctx, "billing", func(p projections.RebuildProgress) { applied = p.Applied })
			if err != nil {
				b.Fatalf("rebuild: %v", err)
			}
			if applied != int64(n) {
				b.Fatalf("rebuild applied %d events, want %d", applied, n)
			}
		}
		b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
	})

	// The rebuilt read model must be the one the events describe, or the figure means nothing:
	// every event is a history row, and each workspace ends at the balance preloadBilling's
	// cycle leaves (see there).
	var rows, wrong int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM billing_transactions`).Scan(&rows); err != nil {
		b.Fatal(err)
	}
	if rows != n {
		b.Fatalf("billing_transactions has %d rows, want %d", rows, n)
	}
	err = pool.QueryRow(ctx, `
		WITH want AS (
			SELECT w, count(*) AS events, count(*) FILTER (WHERE r % 3 = 0) AS topups,
			       count(*) FILTER (WHERE r % 3 = 1) AS renewals, count(*) FILTER (WHERE r % 3 = 2) AS charges
			FROM (SELECT g % $2 AS w, g / $2 AS r FROM generate_series(0, $1::int - 1) AS g) s GROUP BY w)
		SELECT count(*) FROM want
		LEFT JOIN balances b ON b.workspace_id = 'bench-ws-' || want.w
		WHERE b.workspace_id IS NULL OR b.revision <> want.events - 1
		   OR b.credit <> want.topups * 10000
		   OR b.usage <> CASE WHEN want.renewals = 0 THEN 0 WHEN want.charges = want.renewals THEN 2000 ELSE 5000 END`,
		n, benchWorkspaces).Scan(&wrong)
	if err != nil {
		b.Fatal(err)
	}
	if wrong != 0 {
		b.Fatalf("%d workspaces have the wrong balance after the rebuild", wrong)
	}
}

// preloadBilling bulk-inserts n billing events in one statement (the rows the store's append
// writes, as eventstore/postgres's catch-up benchmark does): appending a million events one by
// one would take far longer than the rebuild being measured. Event g is revision g/1000 of
// workspace g%1000's stream, so each stream's revisions rise with the log position. Each
// workspace repeats a cycle of three valid events: a top-up of 10 credits, a plan renewal to 5
// included credits (lapsing the 2 left from the period before), and a charge of 3 credits taken
// from the included balance.
func preloadBilling(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	_, err := pool.Exec(context.Background(), `
WITH src AS (
    SELECT g, 'bench-ws-' || (g % $2) AS ws, g / $2 AS rev, (g / $2) % 3 AS kind, (g / $2) / 3 AS cycle,
           to_char(timestamptz '2026-01-01 00:00:00+00' + g * interval '1 millisecond',
                   'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at
    FROM generate_series(0, $1::int - 1) AS g
), ins AS (
    INSERT INTO events (stream, revision, event_id, type, category, data, metadata)
    SELECT 'billing-' || ws, rev, gen_random_uuid(),
           CASE kind WHEN 0 THEN 'CreditsPurchased' WHEN 1 THEN 'PlanRenewed' ELSE 'CreditsCharged' END,
           'billing',
           CASE kind
               WHEN 0 THEN jsonb_build_object('workspaceId', ws, 'amount', 10, 'reference', 'invoice-' || cycle, 'at', at)
               WHEN 1 THEN jsonb_build_object('workspaceId', ws, 'included', 5, 'lapsed', CASE WHEN cycle = 0 THEN 0 ELSE 2 END, 'at', at)
               ELSE jsonb_build_object('workspaceId', ws, 'cause', 'execution-' || g, 'amount', 3, 'fromUsage', 3, 'fromCredit', 0, 'at', at)
           END,
           jsonb_build_object('source', 'benchmark')
    FROM src
    ORDER BY g
    RETURNING stream, revision
)
INSERT INTO streams (name, revision, tx_id)
SELECT stream, max(revision), pg_current_xact_id() FROM ins GROUP BY stream`, n, benchWorkspaces)
	if err != nil {
		b.Fatalf("preload: %v", err)
	}
}

// waitVisible waits until the store's log shows all n events: a subscriber's horizon can trail
// a commit briefly (see eventstore/postgres).
func waitVisible(b *testing.B, pool *pgxpool.Pool, store *postgres.Store, n int) {
	b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		head, err := store.HeadPosition(ctx)
		if err != nil {
			b.Fatalf("head: %v", err)
		}
		var count int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE (tx_id, position) <= ($1::xid8, $2::bigint)`,
			head.Commit, int64(head.Prepare)).Scan(&count); err != nil {
			b.Fatalf("count: %v", err)
		}
		if count == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d preloaded events visible after a minute", count, n)
		}
		// Polling the horizon: there is no event to wait on for a bulk insert's visibility.
		time.Sleep(10 * time.Millisecond)
	}
}
