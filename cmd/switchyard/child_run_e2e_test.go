package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// childParentDef is a parent whose RUN_WORKFLOW stage "call" runs the workflow child with the
// trigger's x as n, and feeds the child's output to "after".
func childParentDef(name, childID string) string {
	return fmt.Sprintf(`{"name": %q, "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "call", "module": "RUN_WORKFLOW", "config": {"workflowId": %q}},
	{"id": "after", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "call", "mapping": {"n": "x"}}, {"from": "call", "to": "after"}]}`, name, childID)
}

// TestChildRunsBlackBox runs RUN_WORKFLOW stages through the built binary: a child's output
// completes its parent's stage and both details link each other; a failed child fails the
// stage with child_run_failed; cancelling a parent cancels its child; a RUN_WORKFLOW naming
// another workspace's workflow is a 400; a workflow that runs itself fails with cycle.
func TestChildRunsBlackBox(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000", "SWITCHYARD_WEBHOOK_ALLOW_PRIVATE=true")
	c := svc.caller(t, svc.key)
	ws := svc.key.WorkspaceID
	api := svc.ownerAPI(t)

	t.Run("a parent completes with its child's output, and the runs name each other", func(t *testing.T) {
		child := svc.createWorkflow(t, ws, `{"name": "double", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "double", "module": "json.jq", "config": {"query": "{doubled: (.n * 2)}"}}],
		  "edges": [{"from": "t", "to": "double"}]}`)["id"].(string)
		parent := svc.createWorkflow(t, ws, childParentDef("parent ok", child))["id"].(string)
		m := pollRun(t, c, c.trigger(t, parent, `{"x": 4}`), 30*time.Second, terminal)
		out, _ := json.Marshal(m["output"])
		if m["status"] != "COMPLETED" || string(out) != `{"after":{"double":{"doubled":8}}}` {
			t.Fatalf("parent %s, output %s", m["status"], out)
		}
		call := stageOf(t, m, "call")
		callOut, _ := json.Marshal(call["output"])
		if call["status"] != "COMPLETED" || string(callOut) != `{"double":{"doubled":8}}` || call["creditUsage"] != float64(0) ||
			call["childRunId"] == nil || call["executionEventId"] != nil {
			t.Fatalf("RUN_WORKFLOW stage %v", call)
		}
		if m["parentRunId"] != nil {
			t.Fatalf("a triggered run names a parent: %v", m["parentRunId"])
		}
		ch := pollRun(t, c, call["childRunId"].(string), 30*time.Second, terminal)
		if ch["status"] != "COMPLETED" || ch["workflowId"] != child || ch["parentRunId"] != m["id"] || ch["parentStageId"] != call["id"] {
			t.Fatalf("child %v", ch)
		}
		if in, _ := json.Marshal(stageOf(t, ch, "t")["output"]); string(in) != `{"n":4}` {
			t.Fatalf("the child's trigger body is %s, want the stage's input", in)
		}
		if m["totalUsage"] != float64(1) || ch["totalUsage"] == float64(0) {
			t.Fatalf("usage: parent %v (want 1: the RUN_WORKFLOW stage is free), child %v", m["totalUsage"], ch["totalUsage"])
		}
	})

	t.Run("a failed child fails the parent's stage with child_run_failed", func(t *testing.T) {
		child := svc.createWorkflow(t, ws, `{"name": "fails", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "boom", "module": "core.fail", "config": {"code": "E42"}}],
		  "edges": [{"from": "t", "to": "boom"}]}`)["id"].(string)
		parent := svc.createWorkflow(t, ws, childParentDef("parent fails", child))["id"].(string)
		m := pollRun(t, c, c.trigger(t, parent, `{"x": 1}`), 30*time.Second, terminal)
		call := stageOf(t, m, "call")
		e, _ := call["error"].(map[string]any)
		details, _ := e["details"].(map[string]any)
		if m["status"] != "FAILED" || call["status"] != "FAILED" || e["code"] != "child_run_failed" || details["runId"] != call["childRunId"] {
			t.Fatalf("parent %s, stage %v", m["status"], call)
		}
		if ch := pollRun(t, c, call["childRunId"].(string), 30*time.Second, terminal); ch["status"] != "FAILED" {
			t.Fatalf("child %v", ch)
		}
	})

	t.Run("cancelling a parent cancels its running child", func(t *testing.T) {
		child := svc.createWorkflow(t, ws, `{"name": "slow", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "wait", "module": "core.delay", "config": {"ms": 5000}}],
		  "edges": [{"from": "t", "to": "wait"}]}`)["id"].(string)
		parent := svc.createWorkflow(t, ws, childParentDef("parent cancelled", child))["id"].(string)
		id := c.trigger(t, parent, `{"x": 1}`)
		m := pollRun(t, c, id, 30*time.Second, func(m map[string]any) bool {
			return m["runStages"] != nil && len(stages(m)) > 1 && stageOf(t, m, "call")["status"] == "RUNNING"
		})
		childID := stageOf(t, m, "call")["childRunId"].(string)
		mustStatus(t, c.post("/v1/sdk/workflows/executions/"+id+"/cancel", `{"reason": "enough"}`), http.StatusOK, "cancel parent")
		ch := pollRun(t, c, childID, 30*time.Second, terminal)
		if e, _ := ch["error"].(map[string]any); ch["status"] != "FAILED" || ch["cancelRequestedAt"] == nil || e["code"] != "canceled" {
			t.Fatalf("child after its parent's cancel: %v", ch)
		}
	})

	t.Run("a parent past its timeoutMs fails with run_timeout and cancels its running child", func(t *testing.T) {
		child := svc.createWorkflow(t, ws, `{"name": "slower", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "wait", "module": "core.delay", "config": {"ms": 3000}}],
		  "edges": [{"from": "t", "to": "wait"}]}`)["id"].(string)
		parent := svc.createWorkflow(t, ws, strings.Replace(childParentDef("parent timed out", child), `"components"`, `"timeoutMs": 1000, "components"`, 1))["id"].(string)
		m := pollRun(t, c, c.trigger(t, parent, `{"x": 1}`), 30*time.Second, terminal)
		call := stageOf(t, m, "call")
		if m["status"] != "FAILED" || !strings.Contains(fmt.Sprint(m["error"]), "code:run_timeout") || call["childRunId"] == nil {
			t.Fatalf("parent %s (error %v), stage %v", m["status"], m["error"], call)
		}
		ch := pollRun(t, c, call["childRunId"].(string), 30*time.Second, terminal)
		if e, _ := ch["error"].(map[string]any); ch["status"] != "FAILED" || e["code"] != "canceled" {
			t.Fatalf("child after its parent's timeout: %v", ch)
		}
	})

	t.Run("a re-run of a parent whose child failed starts a new child at the failed stage", func(t *testing.T) {
		var mu sync.Mutex
		down := true
		svcDown := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if down {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"ok": true}`)
		}))
		defer svcDown.Close()
		child := svc.createWorkflow(t, ws, fmt.Sprintf(`{"name": "calls out", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "fetch", "module": "http.request", "config": {"url": %q, "failOnHttpError": true}}],
		  "edges": [{"from": "t", "to": "fetch"}]}`, svcDown.URL))["id"].(string)
		parent := svc.createWorkflow(t, ws, childParentDef("parent re-run", child))["id"].(string)
		first := pollRun(t, c, c.trigger(t, parent, `{"x": 3}`), 30*time.Second, terminal)
		if first["status"] != "FAILED" || stageOf(t, first, "call")["status"] != "FAILED" {
			t.Fatalf("first run %s, stage %v", first["status"], stageOf(t, first, "call"))
		}
		mu.Lock()
		down = false
		mu.Unlock()
		m := pollRun(t, c, c.rerun(t, first["id"].(string), ""), 30*time.Second, terminal)
		call := stageOf(t, m, "call")
		var out struct {
			After struct{ Fetch struct{ Status int } }
		}
		raw, _ := json.Marshal(m["output"])
		if m["status"] != "COMPLETED" || m["rerunOf"] != first["id"] || call["reused"] != false || call["childRunId"] == stageOf(t, first, "call")["childRunId"] ||
			json.Unmarshal(raw, &out) != nil || out.After.Fetch.Status != http.StatusOK {
			t.Fatalf("re-run %s (rerunOf %v), stage %v, output %s", m["status"], m["rerunOf"], call, raw)
		}
		ch := pollRun(t, c, call["childRunId"].(string), 30*time.Second, terminal)
		if ch["status"] != "COMPLETED" || ch["parentRunId"] != m["id"] || ch["parentStageId"] != call["id"] {
			t.Fatalf("the re-run's child %v", ch)
		}
	})

	t.Run("a RUN_WORKFLOW in a loop's body runs a child per iteration; the gather lists the failed child", func(t *testing.T) {
		child := svc.createWorkflow(t, ws, `{"name": "double unless 3", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "double", "module": "expr.eval", "config": {"expression": "[n * 2][n == 3 ? 1 : 0]"}}],
		  "edges": [{"from": "t", "to": "double"}]}`)["id"].(string)
		parent := svc.createWorkflow(t, ws, fmt.Sprintf(`{"name": "a child per item", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "each", "module": "FOR_EACH", "config": {"items": "xs", "body": ["call"], "onFailure": "continue"}},
			{"id": "call", "module": "RUN_WORKFLOW", "config": {"workflowId": %q}},
			{"id": "sum", "module": "core.echo"}],
		  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "call", "mapping": {"n": "item"}}, {"from": "call", "to": "sum"}]}`, child))["id"].(string)
		m := pollRun(t, c, c.trigger(t, parent, `{"xs": [1, 2, 3]}`), 30*time.Second, terminal)
		out, _ := json.Marshal(m["output"])
		if m["status"] != "COMPLETED" || string(out) != `{"sum":{"failed":[2],"items":[{"double":{"result":2}},{"double":{"result":4}},null]}}` {
			t.Fatalf("parent %s, output %s", m["status"], out)
		}
		children := map[any]bool{}
		for _, s := range stages(m) {
			if s["referenceId"] != "call" {
				continue
			}
			ch := pollRun(t, c, s["childRunId"].(string), 30*time.Second, terminal)
			wantStatus := map[bool]string{true: "FAILED", false: "COMPLETED"}[s["iteration"] == float64(2)]
			if ch["status"] != wantStatus || s["status"] != wantStatus || ch["parentStageId"] != s["id"] || children[ch["id"]] {
				t.Fatalf("iteration %v: stage %s, child %v", s["iteration"], s["status"], ch)
			}
			children[ch["id"]] = true
		}
		if len(children) != 3 {
			t.Fatalf("%d children, want one per item", len(children))
		}
	})

	t.Run("a RUN_WORKFLOW naming another workspace's workflow is a 400", func(t *testing.T) {
		var other struct {
			WorkspaceID string `json:"workspaceId"`
		}
		svc.cli.okJSON(&other, "admin", "workspace", "create", "--name", "other", "--owner", "owner@example.com", "--json")
		foreign := svc.createWorkflow(t, other.WorkspaceID, `{"name": "theirs", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)["id"].(string)
		def := childParentDef("parent foreign", foreign)
		status, body := api.call("POST", "/v1/workspaces/"+ws+"/workflows", def)
		if status != http.StatusBadRequest || fmt.Sprint(body["message"]) == "" ||
			!strings.Contains(fmt.Sprint(body["message"]), `components[1] (component "call").config.workflowId`) {
			t.Fatalf("create: %d %v", status, body)
		}
	})

	t.Run("a workflow that runs itself fails with cycle", func(t *testing.T) {
		self := svc.createWorkflow(t, ws, `{"name": "self", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)["id"].(string)
		status, body := api.call("PUT", "/v1/workspaces/"+ws+"/workflows/"+self, childParentDef("self", self))
		if status != http.StatusOK {
			t.Fatalf("update: %d %v", status, body)
		}
		m := pollRun(t, c, c.trigger(t, self, `{"x": 1}`), 30*time.Second, terminal)
		call := stageOf(t, m, "call")
		if e, _ := call["error"].(map[string]any); m["status"] != "FAILED" || e["code"] != "cycle" {
			t.Fatalf("self-running workflow: %s, stage %v", m["status"], call)
		}
	})

	t.Run("a child six deep fails with nesting_too_deep, and each parent with child_run_failed", func(t *testing.T) {
		next := svc.createWorkflow(t, ws, `{"name": "depth 6", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)["id"].(string)
		for depth := 5; depth >= 0; depth-- {
			next = svc.createWorkflow(t, ws, childParentDef(fmt.Sprintf("depth %d", depth), next))["id"].(string)
		}
		m := pollRun(t, c, c.trigger(t, next, `{"x": 1}`), 30*time.Second, terminal)
		for depth := 0; ; depth++ {
			call := stageOf(t, m, "call")
			e, _ := call["error"].(map[string]any)
			if depth == 5 {
				if m["status"] != "FAILED" || e["code"] != "nesting_too_deep" || call["childRunId"] == nil {
					t.Fatalf("the run at depth 5: %s, stage %v", m["status"], call)
				}
				mustStatus(t, c.do(http.MethodGet, "/v1/sdk/workflows/executions/"+call["childRunId"].(string), nil), http.StatusNotFound, "the child that never started")
				break
			}
			if m["status"] != "FAILED" || e["code"] != "child_run_failed" {
				t.Fatalf("the run at depth %d: %s, stage %v", depth, m["status"], call)
			}
			m = pollRun(t, c, call["childRunId"].(string), 30*time.Second, terminal)
		}
	})

	t.Run("the worked example of docs/workflows.md gives the outputs it shows", func(t *testing.T) {
		doc, err := os.ReadFile("../../docs/workflows.md")
		if err != nil {
			t.Fatal(err)
		}
		blocks := map[string]string{}
		for _, b := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
			for _, name := range []string{"Risk score", "Place order"} {
				if strings.Contains(b[1], `"name": "`+name+`"`) {
					blocks[name] = b[1]
				}
			}
		}
		if len(blocks) != 2 {
			t.Fatalf("docs/workflows.md lacks the child run example: %v", blocks)
		}
		risk := svc.createWorkflow(t, ws, blocks["Risk score"])["id"].(string)
		order := svc.createWorkflow(t, ws, strings.Replace(blocks["Place order"], "<the id of Risk score>", risk, 1))["id"].(string)
		m := pollRun(t, c, c.trigger(t, order, `{"total": 50}`), 30*time.Second, terminal)
		out, _ := json.Marshal(m["output"])
		stage := stageOf(t, m, "risk")
		riskOut, _ := json.Marshal(stage["output"])
		if m["status"] != "COMPLETED" || string(out) != `{"confirm":{"text":"Order accepted, risk 0.1"}}` || string(riskOut) != `{"score":{"result":0.1}}` {
			t.Fatalf("order run %s, output %s, risk stage %s", m["status"], out, riskOut)
		}
		ch := pollRun(t, c, stage["childRunId"].(string), 30*time.Second, terminal)
		if ch["parentRunId"] != m["id"] || ch["parentStageId"] != stage["id"] || ch["totalUsage"] != 1.5 || m["totalUsage"] != stageOf(t, m, "confirm")["creditUsage"] || stage["creditUsage"] != float64(0) {
			t.Fatalf("child %v; parent usage %v", ch, m["totalUsage"])
		}
	})

	stopAndAudit(t, svc.cli, svc.srv, ws)
}

// A serve process killed with SIGKILL while a child run runs: after the restart the child
// finishes once, the parent completes with its output, one child was started, and billing
// audit is clean.
func TestSIGKILLDuringAChildRun(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	ws := svc.key.WorkspaceID
	child := svc.createWorkflow(t, ws, `{"name": "slow child", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "wait", "module": "core.delay", "config": {"ms": 1500}},
		{"id": "echo", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "wait"}, {"from": "wait", "to": "echo"}]}`)["id"].(string)
	id := c.trigger(t, svc.createWorkflow(t, ws, childParentDef("parent killed", child))["id"].(string), `{"x": 7}`)
	m := pollRun(t, c, id, 30*time.Second, func(m map[string]any) bool {
		return len(stages(m)) > 1 && stageOf(t, m, "call")["status"] == "RUNNING"
	})
	childID := stageOf(t, m, "call")["childRunId"].(string)
	restarted := svc.killAndRestart(t)

	m = pollRun(t, c, id, 60*time.Second, terminal)
	if out, _ := json.Marshal(m["output"]); m["status"] != "COMPLETED" || string(out) != `{"after":{"echo":{"n":7}}}` {
		t.Fatalf("parent after the crash: %s, output %s", m["status"], out)
	}
	ch := pollRun(t, c, childID, 30*time.Second, terminal)
	if n := eventCount(t, svc.cli, "run-"+childID, "RunTriggered"); n != 1 || ch["status"] != "COMPLETED" {
		t.Fatalf("child %s triggered %d times", ch["status"], n)
	}
	for _, comp := range []string{"wait", "echo"} {
		exec := stageOf(t, ch, comp)["executionEventId"].(string)
		if n := eventCount(t, svc.cli, "execution-"+exec, "ExecutionCompleted"); n != 1 {
			t.Fatalf("child stage %s completed %d times", comp, n)
		}
	}
	if total := stopAndAudit(t, svc.cli, restarted, ws); total != 1000-3 { // wait 1, echo 1 in the child; after 1 in the parent
		t.Fatalf("balance %v, want 997", total)
	}
	if ledger := readExecutionLog(t, svc.cli); len(ledger) != 3 || ledger.once(t) != 3 {
		t.Fatalf("the log has %d executions, want the 3 stages' (wait, echo, after), each charged once: %v", len(ledger), ledger)
	}
}
