package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// workspaceAPI calls the workspace endpoints with the bootstrapped owner's session.
type workspaceAPI struct {
	t       *testing.T
	c       *cli
	session string
}

func (s *sdkService) ownerAPI(t *testing.T) *workspaceAPI {
	t.Helper()
	a := &workspaceAPI{t: t, c: s.cli}
	st, login := a.call("POST", "/v1/auth/login", `{"email":"owner@example.com","password":"password-123"}`)
	if st != http.StatusOK || login["token"] == nil {
		t.Fatalf("login: %d %v", st, login)
	}
	a.session = login["token"].(string)
	return a
}

func (a *workspaceAPI) call(method, path, body string) (int, map[string]any) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.c.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if a.session != "" {
		req.Header.Set("Authorization", "Bearer "+a.session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// retryDef is a workflow of one core.fail stage with component fields extra.
func retryDef(name, extra string) string {
	return fmt.Sprintf(`{"name": %q, "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "flaky", "module": "core.fail", %s}],
	  "edges": [{"from": "t", "to": "flaky"}]}`, name, extra)
}

// TestRetryPolicyBlackBox saves workflows with retry policies through the workspace endpoints
// and runs them through the SDK: the policy's attempts (beyond the 3 of attempts alone) are
// used, a non-retryable code ends the stage at its first attempt, and a bad policy is a 400
// naming the field.
func TestRetryPolicyBlackBox(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	api := svc.ownerAPI(t)
	base := "/v1/workspaces/" + svc.key.WorkspaceID + "/workflows"
	create := func(def string) string {
		t.Helper()
		st, wf := api.call("POST", base, def)
		if st != http.StatusCreated {
			t.Fatalf("create: %d %v", st, wf)
		}
		return wf["id"].(string)
	}

	t.Run("retried with the policy's attempts", func(t *testing.T) {
		id := create(retryDef("five tries", `"config": {"code": "flaky", "succeedOnAttempt": 5},
			"retry": {"attempts": 6, "initialIntervalMs": 100, "backoffCoefficient": 1.5, "maxIntervalMs": 200}`))
		st, wf := api.call("GET", base+"/"+id, "")
		policy, _ := json.Marshal(wf["components"].([]any)[1].(map[string]any)["retry"])
		if st != http.StatusOK || string(policy) != `{"attempts":6,"backoffCoefficient":1.5,"initialIntervalMs":100,"maxIntervalMs":200}` {
			t.Fatalf("the saved policy: %d %s", st, policy)
		}
		m := pollRun(t, c, c.trigger(t, id, `{"x": 1}`), 60*time.Second, terminal)
		flaky := stageOf(t, m, "flaky")
		if m["status"] != "COMPLETED" || flaky["status"] != "COMPLETED" || flaky["executionAttempt"] != float64(5) {
			t.Fatalf("run %v; stage %v: want COMPLETED at attempt 5", m["status"], flaky)
		}
		// Each failed attempt's recorded due time is the policy's: 100 ms, then ×1.5, capped at 200.
		waits := retryWaits(t, svc.cli, "execution-"+flaky["executionEventId"].(string))
		if fmt.Sprint(waits) != "[100ms 150ms 200ms 200ms]" {
			t.Fatalf("recorded retry waits %v, want [100ms 150ms 200ms 200ms]", waits)
		}
	})

	t.Run("a non-retryable code stops at one attempt", func(t *testing.T) {
		id := create(retryDef("fatal", `"config": {"code": "bad_input"},
			"retry": {"attempts": 5, "initialIntervalMs": 100, "nonRetryableErrors": ["bad_input"]}`))
		m := pollRun(t, c, c.trigger(t, id, ""), 60*time.Second, terminal)
		flaky := stageOf(t, m, "flaky")
		if m["status"] != "FAILED" || flaky["status"] != "FAILED" || flaky["executionAttempt"] != float64(1) ||
			!strings.Contains(fmt.Sprint(flaky["error"]), "bad_input") {
			t.Fatalf("run %v; stage %v: want FAILED after attempt 1", m["status"], flaky)
		}
	})

	t.Run("other codes are retried to the last attempt", func(t *testing.T) {
		id := create(retryDef("exhausted", `"config": {"code": "flaky"},
			"retry": {"attempts": 4, "initialIntervalMs": 100, "backoffCoefficient": 1, "nonRetryableErrors": ["bad_input"]}`))
		m := pollRun(t, c, c.trigger(t, id, ""), 60*time.Second, terminal)
		if flaky := stageOf(t, m, "flaky"); m["status"] != "FAILED" || flaky["executionAttempt"] != float64(4) {
			t.Fatalf("run %v; stage %v: want FAILED after attempt 4", m["status"], flaky)
		}
	})

	t.Run("an attempt past the stage's timeoutMs fails with timeout and is retried", func(t *testing.T) {
		id := create(`{"name": "slow attempts", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "slow", "module": "core.delay", "config": {"ms": 10000}, "timeoutMs": 200,
			 "retry": {"attempts": 2, "initialIntervalMs": 100}}],
		  "edges": [{"from": "t", "to": "slow"}]}`)
		m := pollRun(t, c, c.trigger(t, id, ""), 60*time.Second, terminal)
		slow := stageOf(t, m, "slow")
		if m["status"] != "FAILED" || slow["status"] != "FAILED" || slow["executionAttempt"] != float64(2) ||
			!strings.Contains(fmt.Sprint(slow["error"]), "code:timeout") || !strings.Contains(fmt.Sprint(slow["error"]), "timeoutMs") {
			t.Fatalf("run %v; stage %v: want FAILED with code timeout after attempt 2", m["status"], slow)
		}
	})

	t.Run("a run past its timeoutMs fails with run_timeout", func(t *testing.T) {
		id := create(`{"name": "slow run", "timeoutMs": 300, "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "slow", "module": "core.delay", "config": {"ms": 10000}},
			{"id": "after", "module": "core.echo"}],
		  "edges": [{"from": "t", "to": "slow"}, {"from": "slow", "to": "after"}]}`)
		if st, wf := api.call("GET", base+"/"+id, ""); st != http.StatusOK || wf["timeoutMs"] != float64(300) {
			t.Fatalf("the saved workflow: %d %v", st, wf)
		}
		m := pollRun(t, c, c.trigger(t, id, ""), 60*time.Second, terminal)
		slow := stageOf(t, m, "slow")
		if m["status"] != "FAILED" || !strings.Contains(fmt.Sprint(m["error"]), "code:run_timeout") || len(stages(m)) != 2 ||
			slow["status"] != "FAILED" || !strings.Contains(fmt.Sprint(slow["error"]), "code:canceled") {
			t.Fatalf("run %v (error %v); stage %v: want FAILED with run_timeout and the open stage cancelled", m["status"], m["error"], slow)
		}
	})

	t.Run("a bad policy is a 400 naming the field", func(t *testing.T) {
		for field, policy := range map[string]string{
			"retry.backoffCoefficient": `{"attempts": 3, "backoffCoefficient": 0.5}`,
			"retry.attempts":           `{"attempts": 11}`,
			"retry.initialIntervalMs":  `{"attempts": 3, "initialIntervalMs": 10}`,
			"retry.maxIntervalMs":      `{"attempts": 3, "initialIntervalMs": 1000, "maxIntervalMs": 999}`,
			"retry.colour":             `{"attempts": 3, "colour": "red"}`,
		} {
			st, body := api.call("POST", base, retryDef("bad "+field, `"retry": `+policy))
			if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.Contains(msg, "components[1]") ||
				!strings.Contains(msg, field[len("retry."):]) {
				t.Fatalf("%s: %d %v", field, st, body)
			}
		}
		st, body := api.call("POST", base, retryDef("bad timeout", `"timeoutMs": 10`))
		if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.Contains(msg, "components[1]") || !strings.Contains(msg, "timeoutMs") {
			t.Fatalf("timeoutMs 10: %d %v", st, body)
		}
		st, body = api.call("POST", base, `{"name": "bad run timeout", "timeoutMs": 86400001, "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)
		if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.HasPrefix(msg, "timeoutMs") {
			t.Fatalf("run timeoutMs: %d %v", st, body)
		}
	})
}

// retryWaits lists, from the log, how long each failed attempt of stream was to wait for its
// retry (retryAt minus the failure's time).
func retryWaits(t *testing.T, c *cli, stream string) []time.Duration {
	t.Helper()
	conn := c.connect(t)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT data FROM events WHERE stream = $1 AND type = 'ExecutionAttemptFailed' ORDER BY revision`, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Duration
	for rows.Next() {
		var ev struct{ At, RetryAt time.Time }
		if err := rows.Scan(&ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.RetryAt.Sub(ev.At))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// eventCount counts the events of type in stream, straight from the log.
func eventCount(t *testing.T, c *cli, stream, typ string) int {
	t.Helper()
	conn := c.connect(t)
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE stream = $1 AND type = $2`, stream, typ).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A serve process killed with SIGKILL while a stage waits for its policy's retry, and while a
// run waits for its timeout: the restarted service takes the retry when due (each attempt
// once, the stage billed once) and times the run out, from the due times in the log.
func TestSIGKILLDuringRetryBackoffAndRunTimeout(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	api := svc.ownerAPI(t)
	base := "/v1/workspaces/" + svc.key.WorkspaceID + "/workflows"
	create := func(def string) string {
		t.Helper()
		st, wf := api.call("POST", base, def)
		if st != http.StatusCreated {
			t.Fatalf("create: %d %v", st, wf)
		}
		return wf["id"].(string)
	}
	retried := c.trigger(t, create(retryDef("backoff", `"config": {"succeedOnAttempt": 3},
		"retry": {"attempts": 3, "initialIntervalMs": 2000, "backoffCoefficient": 1}`)), `{"n": 1}`)
	timed := c.trigger(t, create(`{"name": "deadline", "timeoutMs": 4000, "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "slow", "module": "core.delay", "config": {"ms": 5000}}],
	  "edges": [{"from": "t", "to": "slow"}]}`), "")
	var exec string
	pollRun(t, c, retried, 30*time.Second, func(m map[string]any) bool {
		if len(stages(m)) < 2 {
			return false
		}
		exec, _ = stageOf(t, m, "flaky")["executionEventId"].(string)
		return exec != "" && eventCount(t, svc.cli, "execution-"+exec, "ExecutionAttemptFailed") == 1
	})
	if m := pollRun(t, c, timed, 0, func(map[string]any) bool { return true }); terminal(m) {
		t.Fatalf("the premise failed: the timed run ended before the kill: %v", m["status"])
	}
	restarted := svc.killAndRestart(t)

	m := pollRun(t, c, retried, 60*time.Second, terminal)
	flaky := stageOf(t, m, "flaky")
	if m["status"] != "COMPLETED" || flaky["executionAttempt"] != float64(3) || flaky["creditUsage"] != float64(1) {
		t.Fatalf("retried run after the crash: %v; stage %v", m["status"], flaky)
	}
	if n := eventCount(t, svc.cli, "execution-"+exec, "ExecutionAttemptFailed"); n != 2 {
		t.Fatalf("%d failed attempts recorded, want 2 (attempts 1 and 2, each once)", n)
	}
	m = pollRun(t, c, timed, 60*time.Second, terminal)
	if m["status"] != "FAILED" || !strings.Contains(fmt.Sprint(m["error"]), "code:run_timeout") {
		t.Fatalf("timed run after the crash: %v %v", m["status"], m["error"])
	}
	total := stopAndAudit(t, svc.cli, restarted, svc.key.WorkspaceID)
	// The timed run's delay may or may not have ended (and been charged) before the service
	// stopped; whatever was charged was charged once, and the balance says so.
	ledger := readExecutionLog(t, svc.cli)
	if charged := ledger.once(t); len(ledger) != 2 || ledger[exec].Completed != 1 || ledger[exec].Charged != 1 || total != float64(1000-charged) {
		t.Fatalf("the log has %d executions (want the 2 stages'), the retried stage's %+v, %d charged, balance %v", len(ledger), ledger[exec], charged, total)
	}
}
