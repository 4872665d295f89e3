package main

import (
	"bufio"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Black-box tests of workflows and runs: the built binary, workflows created with the CLI, and
// raw signed SDK calls.

// createWorkflow writes def to a file and runs `admin workflow create --json`.
func (s *sdkService) createWorkflow(t *testing.T, workspaceID, def string) map[string]any {
	t.Helper()
	path := filepath.Join(t.TempDir(), "def.json")
	if err := os.WriteFile(path, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	var wf map[string]any
	s.cli.okJSON(&wf, "admin", "workflow", "create", "--workspace", workspaceID, "--file", path, "--json")
	if wf["id"] == nil || len(wf["components"].([]any)) == 0 {
		t.Fatalf("workflow create printed %v", wf)
	}
	return wf
}

// post sends a signed POST with a unique target: identical POSTs within a second would be one
// signature, refused the second time as a replay.
func (c *rawCaller) post(path string, body string) rawResponse {
	c.t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	return c.do(http.MethodPost, path+sep+"nonce="+strconv.FormatInt(nonces.Add(1), 10), b)
}

// trigger starts the workflow's run and returns its id.
func (c *rawCaller) trigger(t *testing.T, workflowID, body string) string {
	t.Helper()
	r := c.post("/v1/sdk/workflows/"+workflowID, body)
	mustStatus(t, r, http.StatusOK, "trigger")
	var runs []struct{ RunID, JobID string }
	if err := json.Unmarshal(r.body, &runs); err != nil || len(runs) != 1 || runs[0].RunID == "" || runs[0].JobID == "" {
		t.Fatalf("trigger answered %s", r.body)
	}
	return runs[0].RunID
}

// pollRun GETs the run until done accepts it.
func pollRun(t *testing.T, c *rawCaller, id string, within time.Duration, done func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := c.do(http.MethodGet, "/v1/sdk/workflows/executions/"+id, nil)
		mustStatus(t, r, http.StatusOK, "GET run")
		m := r.json(t)
		if done(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: condition not met within %s; last %s", id, within, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stages(m map[string]any) []map[string]any {
	var out []map[string]any
	for _, s := range m["runStages"].([]any) {
		out = append(out, s.(map[string]any))
	}
	return out
}

func stageOf(t *testing.T, m map[string]any, component string) map[string]any {
	t.Helper()
	for _, s := range stages(m) {
		if s["referenceId"] == component {
			return s
		}
	}
	t.Fatalf("run has no stage of component %s: %v", component, m)
	return nil
}

const linearDef = `{"name": %q, "components": [
	{"id": "trigger", "module": "ON_API_CALLED", "position": [0, 0]},
	{"id": "first", "module": "core.echo", "position": [200, 0]},
	{"id": "second", "module": "json.jq", "config": {"query": "{doubled: (.x * 2)}"}, "position": [400, 0]},
	{"id": "third", "module": "core.echo", "position": [600, 0]}],
  "edges": [{"from": "trigger", "to": "first"}, {"from": "first", "to": "second"},
	{"from": "second", "to": "third", "mapping": {"value": "doubled"}}]}`

func TestWorkflowRunsBlackBox(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	ws := svc.key.WorkspaceID

	t.Run("three-stage linear workflow", func(t *testing.T) {
		wf := svc.createWorkflow(t, ws, fmt.Sprintf(linearDef, "linear"))
		m := pollRun(t, c, c.trigger(t, wf["id"].(string), `{"x": 21}`), 30*time.Second, terminal)
		if m["status"] != "COMPLETED" || len(stages(m)) != 4 || m["pendingStageCount"] != float64(0) || m["failedStageCount"] != float64(0) {
			t.Fatalf("run %v", m)
		}
		if m["totalUsage"] != float64(3.5) { // echo 1 + jq 1.5 + echo 1
			t.Fatalf("totalUsage %v, want 3.5", m["totalUsage"])
		}
		third := stageOf(t, m, "third")
		if out, _ := json.Marshal(third["output"]); string(out) != `{"value":42}` {
			t.Fatalf("third stage output %s", out)
		}
		if third["executionEventId"] == nil || third["executionDispatchedAt"] == nil || third["executionAttempt"] != float64(1) || third["iteration"] != float64(-1) {
			t.Fatalf("third stage %v", third)
		}
		// The stage ran as a component execution of the same workspace.
		ex := c.do(http.MethodGet, "/v1/sdk/components/executions/"+third["executionEventId"].(string), nil)
		mustStatus(t, ex, http.StatusOK, "the stage's execution")
	})

	t.Run("FOR_EACH over 50 items", func(t *testing.T) {
		wf := svc.createWorkflow(t, ws, `{"name": "each", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 10}},
			{"id": "work", "module": "core.echo"}],
		  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item", "i": "index"}}]}`)
		items := make([]string, 50)
		for i := range items {
			items[i] = strconv.Itoa(i * 10)
		}
		m := pollRun(t, c, c.trigger(t, wf["id"].(string), `{"items": [`+strings.Join(items, ",")+`]}`), 60*time.Second, terminal)
		if m["status"] != "COMPLETED" || m["totalUsage"] != float64(50) {
			t.Fatalf("run %v %v", m["status"], m["totalUsage"])
		}
		each := stageOf(t, m, "each")
		seen := map[int]bool{}
		for _, s := range stages(m) {
			if s["referenceId"] != "work" {
				continue
			}
			it := int(s["iteration"].(float64))
			out := s["output"].(map[string]any)
			if seen[it] || s["parentStageId"] != each["id"] || s["status"] != "COMPLETED" || out["n"] != float64(it*10) || out["i"] != float64(it) {
				t.Fatalf("iteration stage %v", s)
			}
			seen[it] = true
		}
		if len(seen) != 50 {
			t.Fatalf("%d iterations completed, want 50", len(seen))
		}
	})

	t.Run("a stage failing after 3 attempts fails the run", func(t *testing.T) {
		wf := svc.createWorkflow(t, ws, `{"name": "failing", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "bad", "module": "core.fail", "attempts": 3, "config": {"code": "boom", "message": "no luck"}},
			{"id": "after", "module": "core.echo"}],
		  "edges": [{"from": "t", "to": "bad"}, {"from": "bad", "to": "after"}]}`)
		m := pollRun(t, c, c.trigger(t, wf["id"].(string), ""), 30*time.Second, terminal)
		bad := stageOf(t, m, "bad")
		if m["status"] != "FAILED" || m["failedStageCount"] != float64(1) || len(stages(m)) != 2 || m["error"] == nil {
			t.Fatalf("run %v", m)
		}
		if bad["status"] != "FAILED" || bad["executionAttempt"] != float64(3) || !strings.Contains(fmt.Sprint(bad["error"]), "boom") {
			t.Fatalf("failed stage %v", bad)
		}
	})

	t.Run("cancellation mid-run", func(t *testing.T) {
		wf := svc.createWorkflow(t, ws, `{"name": "slow", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "wait", "module": "core.delay", "config": {"ms": 1500}},
			{"id": "after", "module": "core.echo"}],
		  "edges": [{"from": "t", "to": "wait"}, {"from": "wait", "to": "after"}]}`)
		id := c.trigger(t, wf["id"].(string), "")
		pollRun(t, c, id, 30*time.Second, func(m map[string]any) bool {
			return len(stages(m)) == 2 && stageOf(t, m, "wait")["status"] == "RUNNING"
		})
		r := c.post("/v1/sdk/workflows/executions/"+id+"/cancel", `{"reason": "changed my mind"}`)
		mustStatus(t, r, http.StatusOK, "cancel")
		m := r.json(t)
		if m["status"] != "FAILED" || m["cancelRequestedAt"] == nil || m["cancelReason"] != "changed my mind" {
			t.Fatalf("after cancel %v", m)
		}
		wantErrorBody(t, c.post("/v1/sdk/workflows/executions/"+id+"/cancel", ""), http.StatusConflict, "already finished")
		// The delay's late result changes nothing and nothing downstream starts.
		ex := stageOf(t, m, "wait")["executionEventId"].(string)
		pollExecution(t, c, ex, 30*time.Second, terminal)
		m = pollRun(t, c, id, time.Second, terminal)
		if m["status"] != "FAILED" || len(stages(m)) != 2 || stageOf(t, m, "wait")["status"] != "FAILED" {
			t.Fatalf("run after the late result %v", m)
		}
	})

	t.Run("key scoping, other workspaces and bad input", func(t *testing.T) {
		wf := svc.createWorkflow(t, ws, fmt.Sprintf(linearDef, "scoped"))
		other := svc.createWorkflow(t, ws, fmt.Sprintf(linearDef, "other"))
		id := wf["id"].(string)
		scoped := svc.caller(t, svc.newKey(t, ws, "--allowed-workflow", id))
		runID := scoped.trigger(t, id, "")
		wantErrorBody(t, scoped.post("/v1/sdk/workflows/"+other["id"].(string), ""), http.StatusForbidden, "not allowed")
		otherRun := c.trigger(t, other["id"].(string), "")
		wantErrorBody(t, scoped.do(http.MethodGet, "/v1/sdk/workflows/executions/"+otherRun, nil), http.StatusForbidden, "not allowed")
		wantErrorBody(t, scoped.post("/v1/sdk/workflows/"+other["id"].(string)+"/components/first", `{"name": "x"}`), http.StatusForbidden, "not allowed")
		mustStatus(t, scoped.do(http.MethodGet, "/v1/sdk/workflows/executions/"+runID, nil), http.StatusOK, "own run")

		var ws2 struct {
			ID string `json:"workspaceId"`
		}
		svc.cli.okJSON(&ws2, "admin", "workspace", "create", "--name", "poor", "--owner", "owner@example.com", "--json")
		poor := svc.caller(t, svc.newKey(t, ws2.ID))
		wantErrorBody(t, poor.post("/v1/sdk/workflows/"+id, ""), http.StatusNotFound, "not found")
		wantErrorBody(t, poor.do(http.MethodGet, "/v1/sdk/workflows/executions/"+runID, nil), http.StatusNotFound, "not found")
		own := svc.createWorkflow(t, ws2.ID, fmt.Sprintf(linearDef, "poor"))
		wantErrorBody(t, poor.post("/v1/sdk/workflows/"+own["id"].(string), ""), http.StatusPaymentRequired, "")

		wantErrorBody(t, c.post("/v1/sdk/workflows/"+id, `[1]`), http.StatusBadRequest, "body")
		wantErrorBody(t, c.post("/v1/sdk/workflows/"+id+"/components/first", `{"position": [1]}`), http.StatusBadRequest, "position")
		wantErrorBody(t, c.post("/v1/sdk/workflows/"+id+"/components/second", `{"config": {"query": "{"}}`), http.StatusBadRequest, "config.query")
		wantErrorBody(t, c.post("/v1/sdk/workflows/"+id+"/components/ghost", `{"name": "x"}`), http.StatusNotFound, "")
		wantErrorBody(t, c.post("/v1/sdk/workflows/"+id+"/components/first", `{"colour": "red"}`), http.StatusBadRequest, "colour")
	})

	t.Run("run stream events in order, ending with the terminal event", func(t *testing.T) {
		wf := svc.createWorkflow(t, ws, `{"name": "streamed", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "a", "module": "core.delay", "config": {"ms": 300}},
			{"id": "b", "module": "core.delay", "config": {"ms": 300}}],
		  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}]}`)
		id := c.trigger(t, wf["id"].(string), "")
		events := readRunStream(t, c, id)
		last := events[len(events)-1]
		if last["status"] != "COMPLETED" {
			t.Fatalf("last event %v", last)
		}
		rank := map[any]int{"CREATED": 0, "EXECUTING": 1, "COMPLETED": 2}
		sawRunning := false
		for i, e := range events {
			if i > 0 && rank[e["status"]] < rank[events[i-1]["status"]] {
				t.Fatalf("status went back: %v then %v", events[i-1]["status"], e["status"])
			}
			out := e["output"].(map[string]any)
			if e["id"] != id || out["pendingStageCount"] == nil || out["nonTerminalStages"] == nil {
				t.Fatalf("event %v", e)
			}
			for _, s := range out["nonTerminalStages"].([]any) {
				if s.(map[string]any)["status"] == "RUNNING" {
					sawRunning = true
				}
			}
		}
		if !sawRunning || len(events) < 3 {
			t.Fatalf("the stream showed no running stage in %d events", len(events))
		}
		// Connecting to a finished run sends its state at once and closes.
		again := readRunStream(t, c, id)
		if len(again) != 1 || again[0]["status"] != "COMPLETED" {
			t.Fatalf("stream of a finished run: %v", again)
		}
	})

	t.Run("component update applies to the next run, not the running one", func(t *testing.T) {
		wf := svc.createWorkflow(t, ws, `{"name": "updated", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "wait", "module": "core.delay", "config": {"ms": 800}},
			{"id": "say", "module": "json.jq", "config": {"query": "{v: \"old\"}"}, "position": [1, 2]}],
		  "edges": [{"from": "t", "to": "wait"}, {"from": "wait", "to": "say"}]}`)
		id := wf["id"].(string)
		first := c.trigger(t, id, "")
		r := c.post("/v1/sdk/workflows/"+id+"/components/say", `{"config": {"query": "{v: \"new\"}"}, "name": "Say", "position": [10.5, -3]}`)
		mustStatus(t, r, http.StatusOK, "update component")
		snap := r.json(t)
		cfg, _ := json.Marshal(snap["config"])
		if snap["id"] != "say" || snap["name"] != "Say" || fmt.Sprint(snap["position"]) != "[10.5 -3]" || string(cfg) != `{"query":"{v: \"new\"}"}` || snap["updatedAt"] == nil {
			t.Fatalf("snapshot %v", snap)
		}
		m := pollRun(t, c, first, 30*time.Second, terminal)
		if out := stageOf(t, m, "say")["output"].(map[string]any); out["v"] != "old" {
			t.Fatalf("the running run used the new config: %v", out)
		}
		m = pollRun(t, c, c.trigger(t, id, ""), 30*time.Second, terminal)
		if out := stageOf(t, m, "say")["output"].(map[string]any); out["v"] != "new" {
			t.Fatalf("the next run did not use the new config: %v", out)
		}
	})
}

// readRunStream reads a run's SSE stream until the server closes it and returns its events.
func readRunStream(t *testing.T, c *rawCaller, id string) []map[string]any {
	t.Helper()
	path := "/v1/sdk/workflows/executions/" + id + "/stream"
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(c.priv, []byte(http.MethodGet+"|"+path+"|"+stamp+"|")))
	req.Header.Set("X-Api-Key", c.key.APIKey)
	req.Header.Set("X-Sdk-Timestamp", stamp)
	req.Header.Set("X-Sdk-Signature", sig)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []map[string]any
	lastID := -1
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n <= lastID {
				t.Fatalf("message id %q after %d", v, lastID)
			}
			lastID = n
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			var e map[string]any
			if err := json.Unmarshal([]byte(v), &e); err != nil {
				t.Fatalf("event %q: %v", v, err)
			}
			events = append(events, e)
		}
	}
	if len(events) == 0 {
		t.Fatal("the stream sent no event")
	}
	return events
}

func TestSIGKILLDuringAForEachRun(t *testing.T) {
	const n = 200
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "crash", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 10}},
		{"id": "work", "module": "core.delay", "config": {"ms": 100}}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"i": "index"}}]}`)
	items := make([]string, n)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	id := c.trigger(t, wf["id"].(string), `{"items": [`+strings.Join(items, ",")+`]}`)
	// 200 iterations of 100 ms, 10 at a time, take 2 s or more: kill once some are done.
	pollRun(t, c, id, 60*time.Second, func(m map[string]any) bool {
		if terminal(m) {
			t.Fatalf("the premise failed: the run ended before the kill: %v", m["status"])
		}
		return m["totalUsage"].(float64) >= 20
	})
	restarted := svc.killAndRestart(t)
	m := pollRun(t, c, id, 120*time.Second, terminal)
	if m["status"] != "COMPLETED" || m["totalUsage"] != float64(n) {
		t.Fatalf("run after the crash: %v, usage %v", m["status"], m["totalUsage"])
	}
	done := map[float64]bool{}
	for _, s := range stages(m) {
		if s["referenceId"] != "work" {
			continue
		}
		it := s["iteration"].(float64)
		if done[it] || s["status"] != "COMPLETED" || s["creditUsage"] != float64(1) {
			t.Fatalf("iteration stage %v", s)
		}
		done[it] = true
	}
	if len(done) != n {
		t.Fatalf("%d iterations completed, want %d", len(done), n)
	}
	if total := stopAndAudit(t, svc.cli, restarted, svc.key.WorkspaceID); total != 1000-n {
		t.Fatalf("balance after %d iterations of 1 credit = %v, want %d: some ran twice to completion or were not charged", n, total, 1000-n)
	}
	if ledger := readExecutionLog(t, svc.cli); len(ledger) != n || ledger.once(t) != n {
		t.Fatalf("the log has %d executions, want the %d iterations', each charged once", len(ledger), n)
	}
}
