package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/execution"
)

// bench e2e runs end to end on a scratch database; with --cache-window its calls are distinct,
// so each one runs and opens a window of its own instead of reusing the first call's output.
func TestBenchE2EWithCacheWindows(t *testing.T) {
	c := newCLI(t)
	tracePath := filepath.Join(t.TempDir(), "bench.trace")
	res := c.ok("bench", "e2e", "--total", "40", "--clients", "4", "--cache-window", "10m", "--trace", tracePath)
	if !strings.Contains(res.stdout, "e2e: 40 executions submitted and COMPLETED") ||
		!regexp.MustCompile(`e2e cost per execution: CPU [0-9.]+ ms here \(service and load\), [0-9.]+ commits`).MatchString(res.stdout) {
		t.Fatalf("bench e2e printed %q", res.stdout)
	}
	// Every call's charge went through the executor's rounds, which the line counts.
	if !regexp.MustCompile(`e2e charge rounds: [0-9]+ for 40 charges \([0-9.]+ each\), [0-9.]+ ms each, busy [0-9.]+ of the phase; 0 turns awaited\n`).MatchString(res.stdout) {
		t.Fatalf("bench e2e printed %q", res.stdout)
	}
	if b, err := os.ReadFile(tracePath); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) || len(b) < 1024 {
		t.Fatalf("--trace wrote %d bytes (%v), want an execution trace", len(b), err)
	}
	wantDistinctWindows(t, c, 40)
	if res := c.run("bench", "e2e", "--cache-window", "-1s"); res.code == 0 || !strings.Contains(res.stderr, "--cache-window") {
		t.Fatalf("a negative cache window: %s", res)
	}
}

// bench --target drives a separately started serve, as an outside client does: the bench
// process runs no service, so the serve's defaults (here a cache window) run every call.
func TestBenchDrivesASeparateServe(t *testing.T) {
	svc := startSDKService(t, 0, "SWITCHYARD_CACHE_WINDOW=10m", "SWITCHYARD_RATE_LIMIT=100000", "SWITCHYARD_RATE_BURST=100000")
	res := svc.cli.ok("bench", "e2e", "--target", svc.cli.url(""), "--total", "40", "--clients", "4", "--cache-window", "10m")
	if !strings.Contains(res.stdout, "e2e: 40 executions submitted and COMPLETED") {
		t.Fatalf("bench e2e --target printed %q", res.stdout)
	}
	wantDistinctWindows(t, svc.cli, 40)
	if res := svc.cli.run("bench", "e2e", "--target", svc.cli.url(""), "--instances", "2"); res.code == 0 || !strings.Contains(res.stderr, "--target") {
		t.Fatalf("--target with two instances: %s", res)
	}
}

// bench --target with several URLs drives several separately started serves on one database,
// as a load balancer spreads an outside client's calls: every serve runs calls, and the bench
// reports the claims they lost to each other from their /metrics.
func TestBenchDrivesSeveralServes(t *testing.T) {
	svc := startSDKService(t, 0, "SWITCHYARD_RATE_LIMIT=100000", "SWITCHYARD_RATE_BURST=100000")
	second, _ := svc.startSecond(t)
	targets := []string{svc.cli.url(""), second.url("")}
	res := svc.cli.ok("bench", "e2e", "--target", strings.Join(targets, ","), "--total", "40", "--clients", "4")
	if !strings.Contains(res.stdout, "e2e: 40 executions submitted and COMPLETED") ||
		!regexp.MustCompile(`claims: [0-9]+ lost of [0-9]+ over 2 instances`).MatchString(res.stdout) {
		t.Fatalf("bench e2e --target with two serves printed %q", res.stdout)
	}
	for _, base := range targets {
		g, err := scrapeMetrics(context.Background(), strings.TrimRight(base, "/"))
		if err != nil {
			t.Fatal(err)
		}
		// A serve charges the calls it ran first, the calls its clients sent it.
		if _, charged := addHistogram(g, "switchyard_executor_charge_round_charges", 0); charged == 0 {
			t.Errorf("the serve at %s charged no call: the clients were not spread over the targets", base)
		}
	}
	for _, bad := range []string{"ftp://127.0.0.1:1", svc.cli.url("") + ",", "127.0.0.1:1"} {
		if res := svc.cli.run("bench", "e2e", "--target", bad); res.code == 0 || !strings.Contains(res.stderr, "--target") {
			t.Fatalf("--target %q: %s", bad, res)
		}
	}
}

// wantDistinctWindows checks that c's database holds n cache windows and no cached call: each
// of bench's distinct calls ran and opened its own window.
func wantDistinctWindows(t *testing.T, c *cli, n int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var windows, cached int
	if err := conn.QueryRow(context.Background(), `SELECT count(DISTINCT stream) FROM events WHERE category = $1`, execution.CacheCategory).Scan(&windows); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM executions WHERE cached_from <> ''`).Scan(&cached); err != nil {
		t.Fatal(err)
	}
	if windows != n || cached != 0 {
		t.Fatalf("%d cache windows and %d cached calls, want %d and none", windows, cached, n)
	}
}

// bench --workspaces spreads the calls over several workspaces, each with its own account and
// key, and every workspace is called on every instance: each workspace's executions are its
// own, and each is billed to its own account.
func TestBenchE2EAcrossWorkspaces(t *testing.T) {
	c := newCLI(t)
	res := c.ok("bench", "e2e", "--total", "60", "--clients", "6", "--workspaces", "3", "--instances", "2")
	if !strings.Contains(res.stdout, "e2e: 60 executions submitted and COMPLETED") {
		t.Fatalf("bench e2e --workspaces printed %q", res.stdout)
	}
	conn, err := pgx.Connect(context.Background(), c.databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT e.workspace_id, count(*),
		(SELECT count(*) FROM billing_transactions b WHERE b.workspace_id = e.workspace_id AND b.kind = 'charge')
		FROM executions e WHERE e.status = 'COMPLETED' GROUP BY e.workspace_id`)
	if err != nil {
		t.Fatal(err)
	}
	total, workspaces := 0, 0
	for rows.Next() {
		var ws string
		var n, charges int
		if err := rows.Scan(&ws, &n, &charges); err != nil {
			t.Fatal(err)
		}
		if charges != n {
			t.Errorf("workspace %s: %d executions and %d charges", ws, n, charges)
		}
		total, workspaces = total+n, workspaces+1
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if workspaces != 3 || total != 60 {
		t.Fatalf("%d executions over %d workspaces, want 60 over 3", total, workspaces)
	}
	for _, bad := range [][]string{{"e2e", "--workspaces", "0"}, {"runs", "--workspaces", "2"},
		{"e2e", "--workspaces", "2", "--pin-workspaces"}, {"e2e", "--workspaces", "1", "--instances", "2", "--pin-workspaces"}} {
		if res := c.run(append([]string{"bench"}, bad...)...); res.code == 0 || !strings.Contains(res.stderr, "--workspaces") {
			t.Fatalf("bench %v: %s", bad, res)
		}
	}
	// Pinned, no account is charged by two instances: no round awaits a turn.
	res = c.ok("bench", "e2e", "--total", "40", "--clients", "4", "--workspaces", "2", "--instances", "2", "--pin-workspaces")
	if !strings.Contains(res.stdout, "e2e: 40 executions submitted and COMPLETED") || !strings.Contains(res.stdout, "; 0 turns awaited") {
		t.Fatalf("bench e2e --pin-workspaces printed %q", res.stdout)
	}
}

// Unpinned, every workspace is called on every instance, the instances first; pinned,
// workspace k on instance k mod the instances only.
func TestBenchPairs(t *testing.T) {
	if got, want := benchPairs(2, 2, false), []benchPair{{0, 0}, {0, 1}, {1, 0}, {1, 1}}; !slices.Equal(got, want) {
		t.Fatalf("unpinned pairs %v, want %v", got, want)
	}
	if got, want := benchPairs(3, 2, true), []benchPair{{0, 0}, {1, 1}, {2, 0}}; !slices.Equal(got, want) {
		t.Fatalf("pinned pairs %v, want %v", got, want)
	}
}
