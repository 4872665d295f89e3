package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// bench e2e runs drives three-stage workflow runs to COMPLETED on a scratch database: the
// single caller's percentiles, then the callers' stages/s beside e2e's executions/s; every run
// it counts is a COMPLETED run of the read model.
func TestBenchRunsCompletesThreeStageRuns(t *testing.T) {
	c := newCLI(t)
	res := c.ok("bench", "e2e", "runs", "--total", "20", "--clients", "4", "--idle", "3", "--runs", "8")
	idle := regexp.MustCompile(`(?m)^runs idle: 3 runs of 3 core\.echo stages one at a time, trigger to COMPLETED: p50 \S+, p90 \S+, p99 \S+, max \S+ \(0 errors\)$`)
	load := regexp.MustCompile(`(?m)^runs: 8 runs COMPLETED in \S+ with 4 clients: \d+ runs/s, \d+ stages/s, \d+\.\d\d of e2e's \d+ executions/s \(0 errors\)$`)
	if !idle.MatchString(res.stdout) || !load.MatchString(res.stdout) {
		t.Fatalf("bench e2e runs printed %q", res.stdout)
	}
	conn, err := pgx.Connect(context.Background(), c.databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var completed, other int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'COMPLETED'), count(*) FILTER (WHERE status <> 'COMPLETED') FROM runs`).Scan(&completed, &other); err != nil {
		t.Fatal(err)
	}
	if completed != 11 || other != 0 {
		t.Fatalf("%d COMPLETED runs and %d others, want 11 and none", completed, other)
	}
	if res := c.run("bench", "runs", "--runs", "0"); res.code == 0 || !strings.Contains(res.stderr, "--runs") {
		t.Fatalf("no runs: %s", res)
	}
	// Without e2e before it, runs says it has nothing to compare with.
	res = c.ok("bench", "runs", "--clients", "2", "--idle", "1", "--runs", "2")
	if !strings.Contains(res.stdout, "no e2e phase before it to compare with (0 errors)") {
		t.Fatalf("bench runs alone printed %q", res.stdout)
	}
}
