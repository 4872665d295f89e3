package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/testenv"
)

// submitMany submits n bodies from workers goroutines, spreading them over callers, and
// returns the execution ids in order.
func submitMany(t *testing.T, callers []*rawCaller, n, workers int, body func(i int) string) []string {
	t.Helper()
	ids := make([]string, n)
	errs := make(chan string, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := callers[i%len(callers)].submit(body(i))
				var m map[string]any
				if r.status != http.StatusOK || json.Unmarshal(r.body, &m) != nil {
					errs <- fmt.Sprintf("submit %d: %d %s", i, r.status, r.body)
					continue
				}
				ids[i] = fmt.Sprint(m["id"])
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	return ids
}

// startSecond starts another serve process on the service's database, listening on a port of
// its own, and waits until it is ready.
func (s *sdkService) startSecond(t *testing.T) (*cli, *serveProcess) {
	t.Helper()
	second := *s.cli
	second.port = freePort(t)
	second.env = slices.Clone(s.cli.env)
	for i, kv := range second.env {
		if strings.HasPrefix(kv, "SWITCHYARD_LISTEN=") {
			second.env[i] = fmt.Sprintf("SWITCHYARD_LISTEN=127.0.0.1:%d", second.port)
		}
	}
	return &second, second.serveReady()
}

// auditTotal runs `billing audit --json` and returns the folded total, failing unless clean.
func auditTotal(t *testing.T, c *cli, workspaceID string) float64 {
	t.Helper()
	res := c.run("billing", "audit", workspaceID, "--json")
	var rep struct {
		Folded struct {
			Total float64 `json:"total"`
		} `json:"folded"`
		Differences []string `json:"differences"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil || res.code != 0 || len(rep.Differences) != 0 {
		t.Fatalf("billing audit is not clean: %s", res)
	}
	return rep.Folded.Total
}

// restartOffset is how far ahead of the wall the clock of a service restarted after a crash
// reads (a test build's SWITCHYARD_TEST_CLOCK_OFFSET): past every lease the killed process held
// (core.delay's 15 s deadline and the 10 s lease margin), as if it came back after they ran
// out, so that a crash test does not wait them out in wall time. It stays well inside the
// signature skew window the test's clients sign in.
const restartOffset = "SWITCHYARD_TEST_CLOCK_OFFSET=1m"

// killAndRestart kills the service's serve process with SIGKILL and starts another on the same
// database and port, its clock restartOffset ahead, returning it once it is ready.
func (s *sdkService) killAndRestart(t *testing.T) *serveProcess {
	t.Helper()
	if err := s.srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.srv.done
	if !slices.Contains(s.cli.env, restartOffset) {
		s.cli.env = append(s.cli.env, restartOffset)
	}
	return s.cli.serveReady()
}

// stopAndAudit ends a test once its runs have ended (a crash test's, after the restart): it
// stops the service once its projectors have applied the whole log, and requires `billing
// audit` clean and `projections rebuild --all` to reproduce every read-model table row for
// row, so that what the service (or a crash) left in the read model is what the log says. It
// returns the audited balance.
func stopAndAudit(t *testing.T, c *cli, srv *serveProcess, workspaceID string) float64 {
	t.Helper()
	for attempt := 1; ; attempt++ {
		deadline := time.Now().Add(60 * time.Second)
		for behind := projectorsBehind(t, c); behind != ""; behind = projectorsBehind(t, c) {
			if time.Now().After(deadline) {
				t.Fatalf("the projectors did not catch up with the log: %s", behind)
			}
			time.Sleep(200 * time.Millisecond) // each look is a process of its own
		}
		srv.stop(t, 30*time.Second)
		behind := projectorsBehind(t, c)
		if behind == "" {
			break
		}
		// Work that ended while the service drained was recorded after its projectors had
		// stopped: the next start projects it.
		if attempt == 3 {
			t.Fatalf("events were appended after the projectors stopped, %d times in a row: %s", attempt, behind)
		}
		srv = c.serveReady()
	}
	conn := c.connect(t)
	defer conn.Close(context.Background())
	before := testenv.ReadModel(t, conn)
	c.ok("projections", "rebuild", "--all")
	for _, d := range testenv.ReadModelDiff(before, testenv.ReadModel(t, conn)) {
		t.Errorf("projections rebuild did not reproduce the read model: %s", d)
	}
	return auditTotal(t, c, workspaceID)
}

// projectorsBehind names the projectors that have not applied every event of the log, or that
// failed; "" when none.
func projectorsBehind(t *testing.T, c *cli) string {
	t.Helper()
	var st []projections.Status
	c.okJSON(&st, "projections", "status", "--json")
	var behind []string
	for _, s := range st {
		if s.Lag != 0 || s.Error != "" {
			behind = append(behind, fmt.Sprintf("%s (lag %d, error %q)", s.Name, s.Lag, s.Error))
		}
	}
	return strings.Join(behind, ", ")
}

// executionLog counts, from the log, what happened to each execution: submits, completions,
// final failures and charges (by the charge's cause).
type executionLog map[string]struct{ Submitted, Completed, Failed, Charged int }

// readExecutionLog reads the executionLog of every execution in the binary's database.
func readExecutionLog(t *testing.T, c *cli) executionLog {
	t.Helper()
	conn := c.connect(t)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `
		SELECT substr(stream, length('execution-') + 1), type, count(*) FROM events
		 WHERE stream LIKE 'execution-%' AND type IN ('ExecutionSubmitted', 'ExecutionCompleted', 'ExecutionFailed') GROUP BY 1, 2
		UNION ALL
		SELECT substr(data->>'cause', length('execution-') + 1), type, count(*) FROM events
		 WHERE type = 'CreditsCharged' AND data->>'cause' LIKE 'execution-%' GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	out := executionLog{}
	var id, typ string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &typ, &n}, func() error {
		e := out[id]
		switch typ {
		case "ExecutionSubmitted":
			e.Submitted = n
		case "ExecutionCompleted":
			e.Completed = n
		case "ExecutionFailed":
			e.Failed = n
		case "CreditsCharged":
			e.Charged = n
		}
		out[id] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// once fails unless every execution in the log was submitted once, ended at most once and
// charged at most once, and only if it completed; it returns how many were charged.
func (l executionLog) once(t *testing.T) int {
	t.Helper()
	charged := 0
	for id, e := range l {
		if e.Submitted != 1 || e.Completed+e.Failed > 1 || e.Charged > e.Completed {
			t.Fatalf("execution %s: submitted %d, completed %d, failed %d, charged %d times", id, e.Submitted, e.Completed, e.Failed, e.Charged)
		}
		charged += e.Charged
	}
	return charged
}

func TestSIGKILLWithExecutionsInFlight(t *testing.T) {
	const n = 200
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=100000", "SWITCHYARD_RATE_BURST=100000")
	c := svc.caller(t, svc.key)
	ids := submitMany(t, []*rawCaller{c}, n, 16, func(i int) string {
		return fmt.Sprintf(`{"module":"core.delay","input":{"i":%d},"config":{"ms":1000}}`, i)
	})
	// 200 calls of 1 s on at most 64 slots take over 3 s: the last cannot have finished yet.
	last := c.do(http.MethodGet, "/v1/sdk/components/executions/"+ids[n-1], nil).json(t)
	if terminal(last) {
		t.Fatalf("the premise failed: every execution ended before the kill: %v", last)
	}
	restarted := svc.killAndRestart(t)
	for _, id := range ids {
		m := pollExecution(t, c, id, 120*time.Second, terminal)
		if m["status"] != "COMPLETED" || m["totalUsage"] != float64(1) {
			t.Fatalf("execution %s after the crash: %v", id, m)
		}
	}
	restarted.stop(t, 30*time.Second)
	if total := auditTotal(t, svc.cli, svc.key.WorkspaceID); total != 1000-n {
		t.Fatalf("balance after %d executions of 1 credit = %v, want %d: some were charged twice or not at all", n, total, 1000-n)
	}
}

func TestTwoServeProcessesRunEachExecutionOnce(t *testing.T) {
	const n = 1000
	var mu sync.Mutex
	hits := map[string]int{}
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Query().Get("i")]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer counter.Close()
	svc := startSDKService(t, 6000, "SWITCHYARD_RATE_LIMIT=100000", "SWITCHYARD_RATE_BURST=100000",
		"SWITCHYARD_WEBHOOK_ALLOW_PRIVATE=true")
	second, s2 := svc.startSecond(t)
	callers := []*rawCaller{svc.caller(t, svc.key), newRawCaller(t, second.url(""), svc.key)}
	ids := submitMany(t, callers, n, 16, func(i int) string {
		return fmt.Sprintf(`{"module":"http.request","input":{},"config":{"url":"%s/?i=%d","method":"GET"}}`, counter.URL, i)
	})
	for i, id := range ids {
		m := pollExecution(t, callers[i%2], id, 120*time.Second, terminal)
		if m["status"] != "COMPLETED" {
			t.Fatalf("execution %s: %v", id, m)
		}
	}
	mu.Lock()
	for i := range n {
		if got := hits[fmt.Sprint(i)]; got != 1 {
			mu.Unlock()
			t.Fatalf("request %d reached the receiver %d times, want exactly once", i, got)
		}
	}
	mu.Unlock()
	s2.stop(t, 30*time.Second)
	svc.srv.stop(t, 30*time.Second)
	if total := auditTotal(t, svc.cli, svc.key.WorkspaceID); total != 6000-5*n {
		t.Fatalf("balance after %d calls of 5 credits = %v, want %d", n, total, 6000-5*n)
	}
}
