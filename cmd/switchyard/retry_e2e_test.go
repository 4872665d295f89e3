package main

import (
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
	})
}
