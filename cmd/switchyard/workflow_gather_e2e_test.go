package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docExample returns the JSON definition named name among docs/workflows.md's examples.
func docExample(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/workflows.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(b[1], `"name": "`+name+`"`) {
			return b[1]
		}
	}
	t.Fatalf("docs/workflows.md has no %q example", name)
	return ""
}

// stagesOf lists a component's stages of a run by iteration, as "STATUS output-or-error-code".
func stagesOf(t *testing.T, m map[string]any, component string) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, s := range stages(m) {
		if s["referenceId"] != component {
			continue
		}
		v, _ := json.Marshal(s["output"])
		if s["status"] == "FAILED" {
			v = []byte(s["error"].(map[string]any)["code"].(string))
		}
		out[int(s["iteration"].(float64))] = s["status"].(string) + " " + string(v)
	}
	return out
}

func TestWorkflowGatherBlackBox(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	def := docExample(t, "Price basket")

	t.Run("continue: the worked example of docs/workflows.md gives the stages it shows", func(t *testing.T) {
		id := svc.createWorkflow(t, svc.key.WorkspaceID, def)["id"].(string)
		m := pollRun(t, c, c.trigger(t, id, `{"skus": [0, 2, 7]}`), 30*time.Second, terminal)
		if m["status"] != "COMPLETED" || m["failedStageCount"] != float64(1) || len(stages(m)) != 1+1+3+2+1 {
			t.Fatalf("run %s, %v failed, %d stages; want COMPLETED, 1, 8: %v", m["status"], m["failedStageCount"], len(stages(m)), m)
		}
		each := stageOf(t, m, "each")
		want := map[string]map[int]string{
			"each":  {-1: `COMPLETED {"count":3,"failed":[2]}`},
			"price": {0: `COMPLETED {"result":120}`, 1: `COMPLETED {"result":45}`, 2: `FAILED evaluation_error`},
			"line":  {0: `COMPLETED {"cents":120}`, 1: `COMPLETED {"cents":45}`},
			"total": {-1: `COMPLETED {"failed":[2],"items":[{"cents":120},{"cents":45},null]}`},
		}
		for comp, w := range want {
			if got := stagesOf(t, m, comp); !maps.Equal(got, w) {
				t.Errorf("%s stages %v, want %v", comp, got, w)
			}
		}
		for _, s := range stages(m) {
			inLoop := s["referenceId"] == "price" || s["referenceId"] == "line"
			if inLoop != (s["parentStageId"] == each["id"]) {
				t.Errorf("stage %s iteration %v has parentStageId %v", s["referenceId"], s["iteration"], s["parentStageId"])
			}
		}
	})

	t.Run("nested loops: the worked example of docs/workflows.md gives the stages it shows", func(t *testing.T) {
		id := svc.createWorkflow(t, svc.key.WorkspaceID, docExample(t, "Price orders"))["id"].(string)
		m := pollRun(t, c, c.trigger(t, id, `{"orders": [{"skus": [0, 1]}, {"skus": [2, 9]}]}`), 30*time.Second, terminal)
		if m["status"] != "COMPLETED" || m["failedStageCount"] != float64(2) || len(stages(m)) != 10 {
			t.Fatalf("run %s, %v failed, %d stages; want COMPLETED, 2, 10: %v", m["status"], m["failedStageCount"], len(stages(m)), m)
		}
		orders := stageOf(t, m, "orders")
		lines := map[int]map[string]any{}
		for _, s := range stages(m) {
			if s["referenceId"] == "lines" {
				lines[int(s["iteration"].(float64))] = s
				if s["parentStageId"] != orders["id"] {
					t.Fatalf("lines stage %v, want parent %v", s, orders["id"])
				}
			}
		}
		// price stages by the order (the outer iteration of their lines stage) and their own iteration.
		price := map[[2]int]string{}
		for _, s := range stages(m) {
			if s["referenceId"] != "price" {
				continue
			}
			order := -1
			for it, l := range lines {
				if s["parentStageId"] == l["id"] {
					order = it
				}
			}
			v, _ := json.Marshal(s["output"])
			if s["status"] == "FAILED" {
				v = []byte(s["error"].(map[string]any)["code"].(string))
			}
			price[[2]int{order, int(s["iteration"].(float64))}] = s["status"].(string) + " " + string(v)
		}
		wantPrice := map[[2]int]string{{0, 0}: `COMPLETED {"result":120}`, {0, 1}: `COMPLETED {"result":80}`,
			{1, 0}: `COMPLETED {"result":45}`, {1, 1}: `FAILED evaluation_error`}
		if !maps.Equal(price, wantPrice) {
			t.Errorf("price stages %v, want %v", price, wantPrice)
		}
		want := map[string]map[int]string{
			"orders": {-1: `COMPLETED {"count":2,"failed":[1]}`},
			"lines":  {0: `COMPLETED {"count":2,"failed":[]}`, 1: `FAILED iteration_failed`},
			"order":  {0: `COMPLETED {"prices":[{"result":120},{"result":80}]}`},
			"report": {-1: `COMPLETED {"failed":[1],"items":[{"prices":[{"result":120},{"result":80}]},null]}`},
		}
		for comp, w := range want {
			if got := stagesOf(t, m, comp); !maps.Equal(got, w) {
				t.Errorf("%s stages %v, want %v", comp, got, w)
			}
		}
		// One iteration of a loop with a loop in its body cannot be re-run alone.
		wantErrorBody(t, c.post("/v1/sdk/workflows/executions/"+m["id"].(string)+"/rerun", `{"fromStage": "orders", "iteration": 1}`), http.StatusBadRequest, "iteration")
	})

	t.Run("conditions: a body stage skipped in an iteration gathers null; a skipped FOR_EACH skips the gather", func(t *testing.T) {
		id := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "gather conditions", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "each", "module": "FOR_EACH", "config": {"items": "xs", "body": ["check", "line"], "onFailure": "continue"}},
			{"id": "check", "module": "core.echo"},
			{"id": "line", "module": "core.echo"},
			{"id": "total", "module": "core.echo"}],
		  "edges": [{"from": "t", "to": "each", "when": "trigger.go == true"}, {"from": "each", "to": "check", "mapping": {"n": "item"}},
			{"from": "check", "to": "line", "when": "output.n > 1"}, {"from": "line", "to": "total", "mapping": {"lines": "items", "failed": "failed"}}]}`)["id"].(string)
		m := pollRun(t, c, c.trigger(t, id, `{"go": true, "xs": [1, 2, 3]}`), 30*time.Second, terminal)
		out, _ := json.Marshal(m["output"])
		if m["status"] != "COMPLETED" || m["totalUsage"] != float64(3+2+1) || string(out) != `{"total":{"failed":[],"lines":[null,{"n":2},{"n":3}]}}` {
			t.Fatalf("run %s, usage %v, output %s", m["status"], m["totalUsage"], out)
		}
		if line := stagesOf(t, m, "line"); line[0] != "COMPLETED null" || stageOf(t, m, "each")["skipped"] != false {
			t.Fatalf("line stages %v", line)
		}
		m = pollRun(t, c, c.trigger(t, id, `{"go": false, "xs": [1, 2, 3]}`), 30*time.Second, terminal)
		out, _ = json.Marshal(m["output"])
		if m["status"] != "COMPLETED" || m["totalUsage"] != float64(0) || len(stages(m)) != 3 || string(out) != `{"total":null}` ||
			stageOf(t, m, "each")["skipped"] != true || stageOf(t, m, "total")["skipped"] != true {
			t.Fatalf("run with the loop skipped: %s, usage %v, %d stages, output %s: %v", m["status"], m["totalUsage"], len(stages(m)), out, m)
		}
	})

	t.Run("fail (default): the failed iteration fails the FOR_EACH and the run; nothing after the loop runs", func(t *testing.T) {
		id := svc.createWorkflow(t, svc.key.WorkspaceID, strings.Replace(
			strings.Replace(def, `, "onFailure": "continue"`, "", 1), "Price basket", "Price basket or fail", 1))["id"].(string)
		m := pollRun(t, c, c.trigger(t, id, `{"skus": [0, 2, 7]}`), 30*time.Second, terminal)
		if m["status"] != "FAILED" || stagesOf(t, m, "each")[-1] != "FAILED iteration_failed" || len(stagesOf(t, m, "total")) != 0 {
			t.Fatalf("run %s, each %v, total %v: want FAILED, FAILED iteration_failed, no stage", m["status"], stagesOf(t, m, "each"), stagesOf(t, m, "total"))
		}
		if stagesOf(t, m, "price")[2] != "FAILED evaluation_error" {
			t.Fatalf("price stages %v", stagesOf(t, m, "price"))
		}
	})

	stopAndAudit(t, svc.cli, svc.srv, svc.key.WorkspaceID)
}

// nestedCrashDef: orders, 2 at a time, each pricing its skus in an inner loop, 2 at a time, of
// 300 ms stages; order gathers an order's skus, report gathers the orders.
const nestedCrashDef = `{"name": "nested gather crash", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "orders", "module": "FOR_EACH", "config": {"items": "orders", "concurrency": 2, "body": ["skus", "wait", "order"]}},
	{"id": "skus", "module": "FOR_EACH", "config": {"items": "item", "concurrency": 2, "body": ["wait"]}},
	{"id": "wait", "module": "core.delay", "config": {"ms": 300}},
	{"id": "order", "module": "core.echo"},
	{"id": "report", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "orders"}, {"from": "orders", "to": "skus"}, {"from": "skus", "to": "wait", "mapping": {"sku": "item"}},
	{"from": "wait", "to": "order", "mapping": {"skus": "items"}}, {"from": "order", "to": "report", "mapping": {"orders": "items"}}]}`

// A serve process killed with SIGKILL while two runs gather: the iterations of a FOR_EACH
// with a body, some failing under onFailure "continue", and a nested loop's, run. After the
// restart both runs complete, every stage ran once (one execution each: submitted once, ended
// once, charged once if it completed, never if it failed; no other execution), the gathers saw
// every iteration in item order and the failed ones as failed, billing audit is clean and
// projections rebuild reproduces the read model.
func TestSIGKILLDuringAGather(t *testing.T) {
	const n = 40
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	// line fails (index out of range) in iterations 7, 17, 27 and 37.
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "gather crash", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 4, "body": ["work", "line"], "onFailure": "continue"}},
		{"id": "work", "module": "core.delay", "config": {"ms": 300}},
		{"id": "line", "module": "expr.eval", "config": {"expression": "[i][i % 10 == 7 ? 1 : 0]"}},
		{"id": "total", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"i": "index"}},
		{"from": "work", "to": "line"}, {"from": "line", "to": "total", "mapping": {"lines": "items", "failed": "failed"}}]}`)
	nestedWF := svc.createWorkflow(t, svc.key.WorkspaceID, nestedCrashDef)
	items := make([]string, n)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	const orders, skus = 6, 4
	order := make([]string, orders)
	orderOut := make([]string, orders)
	for o := range order {
		var in, out []string
		for k := range skus {
			in = append(in, strconv.Itoa(10*o+k))
			out = append(out, fmt.Sprintf(`{"sku":%d}`, 10*o+k))
		}
		order[o] = "[" + strings.Join(in, ",") + "]"
		orderOut[o] = `{"skus":[` + strings.Join(out, ",") + "]}"
	}
	id := c.trigger(t, wf["id"].(string), `{"items": [`+strings.Join(items, ",")+`]}`)
	nested := c.trigger(t, nestedWF["id"].(string), `{"orders": [`+strings.Join(order, ",")+`]}`)
	// 40 iterations of 300 ms, 4 at a time, take 3 s or more, the nested run's 24 about 2 s:
	// kill once a few of each have ended.
	ended := func(m map[string]any, comp string) (done, all int) {
		for _, s := range stages(m) {
			if s["referenceId"] == comp {
				all++
				if terminal(s) {
					done++
				}
			}
		}
		return done, all
	}
	pollRun(t, c, id, 60*time.Second, func(m map[string]any) bool {
		done, _ := ended(m, "line")
		if terminal(m) || done == n {
			t.Fatalf("the premise failed: every iteration ended before the kill: %v", m["status"])
		}
		return done >= 4
	})
	pollRun(t, c, nested, 60*time.Second, func(m map[string]any) bool {
		done, _ := ended(m, "wait")
		if terminal(m) || done == orders*skus {
			t.Fatalf("the premise failed: every inner iteration ended before the kill: %v", m["status"])
		}
		return done >= 2
	})
	restarted := svc.killAndRestart(t)

	const failed, stageCount, charged = 4, 2*n + 3, 2*n - 4 + 1 // line fails 4 times; failed executions are free
	const usage = n + 1.5*(n-failed) + 1                        // work 1, line 1.5, total 1
	m := pollRun(t, c, id, 120*time.Second, terminal)
	if m["status"] != "COMPLETED" || m["totalUsage"] != usage || len(stages(m)) != stageCount || m["failedStageCount"] != float64(failed) {
		t.Fatalf("run after the crash: %v, usage %v, %d stages, %v failed; want COMPLETED, %v, %d, %d",
			m["status"], m["totalUsage"], len(stages(m)), m["failedStageCount"], usage, stageCount, failed)
	}
	for comp, want := range map[string]int{"work": n, "line": n, "total": 1} {
		if got := len(stagesOf(t, m, comp)); got != want {
			t.Fatalf("%d distinct stages of %s, want %d", got, comp, want)
		}
	}
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"result":%d}`, i)
		if i%10 == 7 {
			lines[i] = "null"
		}
	}
	if got, want := stagesOf(t, m, "total")[-1], `COMPLETED {"failed":[7,17,27,37],"lines":[`+strings.Join(lines, ",")+`]}`; got != want {
		t.Fatalf("the gather: %s, want %s", got, want)
	}

	const nestedStages, nestedUsage = 1 + 1 + orders + orders*skus + orders + 1, orders*skus + orders + 1
	nm := pollRun(t, c, nested, 120*time.Second, terminal)
	if nm["status"] != "COMPLETED" || nm["totalUsage"] != float64(nestedUsage) || len(stages(nm)) != nestedStages {
		t.Fatalf("nested run after the crash: %v, usage %v, %d stages; want COMPLETED, %d, %d", nm["status"], nm["totalUsage"], len(stages(nm)), nestedUsage, nestedStages)
	}
	if got, want := stagesOf(t, nm, "report")[-1], `COMPLETED {"orders":[`+strings.Join(orderOut, ",")+`]}`; got != want {
		t.Fatalf("the nested run's gather: %s, want %s", got, want)
	}

	ledger := readExecutionLog(t, svc.cli)
	for _, s := range append(stages(m), stages(nm)...) {
		if s["module"] == "ON_API_CALLED" || s["module"] == "FOR_EACH" {
			continue
		}
		exec, _ := s["executionEventId"].(string)
		ok := s["status"] == "COMPLETED"
		if s["referenceId"] == "line" && int(s["iteration"].(float64))%10 == 7 {
			ok = s["status"] == "FAILED"
		}
		if e := ledger[exec]; !ok || e.Submitted != 1 || e.Completed+e.Failed != 1 || e.Charged != e.Completed {
			t.Fatalf("stage %s iteration %v (%s, usage %v): execution %q submitted %d, completed %d, failed %d, charged %d times",
				s["referenceId"], s["iteration"], s["status"], s["creditUsage"], exec, e.Submitted, e.Completed, e.Failed, e.Charged)
		}
	}
	if got := ledger.once(t); len(ledger) != 2*n+1+nestedUsage || got != charged+nestedUsage {
		t.Fatalf("the log has %d executions, %d charged; want the runs' %d module stages' alone, %d charged",
			len(ledger), got, 2*n+1+nestedUsage, charged+nestedUsage)
	}
	if total := stopAndAudit(t, svc.cli, restarted, svc.key.WorkspaceID); total != 1000-usage-nestedUsage {
		t.Fatalf("balance %v after the runs used %v credits, want %v", total, usage+nestedUsage, 1000-usage-nestedUsage)
	}
}
