package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// rerun POSTs a re-run of run id and returns the new run's id.
func (c *rawCaller) rerun(t *testing.T, id, body string) string {
	t.Helper()
	r := c.post("/v1/sdk/workflows/executions/"+id+"/rerun", body)
	mustStatus(t, r, http.StatusOK, "rerun")
	var out struct{ RunID, JobID string }
	if err := json.Unmarshal(r.body, &out); err != nil || out.RunID == "" || out.JobID == "" || out.RunID == id {
		t.Fatalf("rerun answered %s", r.body)
	}
	return out.RunID
}

func TestWorkflowRerunBlackBox(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000", "SWITCHYARD_WEBHOOK_ALLOW_PRIVATE=true")
	c := svc.caller(t, svc.key)
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, fmt.Sprintf(linearDef, "rerun"))["id"].(string)
	orig := pollRun(t, c, c.trigger(t, wf, `{"x": 21}`), 30*time.Second, terminal)
	if orig["status"] != "COMPLETED" || orig["totalUsage"] != 3.5 {
		t.Fatalf("original run %s, usage %v", orig["status"], orig["totalUsage"])
	}
	spent := 3.5
	origID := orig["id"].(string)

	t.Run("from the third stage: the first two are reused, only the third is charged", func(t *testing.T) {
		m := pollRun(t, c, c.rerun(t, origID, `{"fromStage": "third"}`), 30*time.Second, terminal)
		if m["status"] != "COMPLETED" || m["rerunOf"] != origID || m["totalUsage"] != float64(1) || len(stages(m)) != 4 {
			t.Fatalf("re-run %v", m)
		}
		for _, comp := range []string{"first", "second"} {
			s, was := stageOf(t, m, comp), stageOf(t, orig, comp)
			if s["status"] != "COMPLETED" || s["reused"] != true || s["creditUsage"] != float64(0) || s["executionEventId"] != nil || fmt.Sprint(s["output"]) != fmt.Sprint(was["output"]) {
				t.Fatalf("reused stage %s: %v", comp, s)
			}
		}
		third := stageOf(t, m, "third")
		if out, _ := json.Marshal(third["output"]); third["reused"] != false || third["creditUsage"] != float64(1) || string(out) != `{"value":42}` {
			t.Fatalf("re-run third stage %v", third)
		}
		spent += 1
	})
	t.Run("with new input and no fromStage the whole run runs again", func(t *testing.T) {
		m := pollRun(t, c, c.rerun(t, origID, `{"input": {"x": 5}}`), 30*time.Second, terminal)
		if out, _ := json.Marshal(stageOf(t, m, "third")["output"]); m["totalUsage"] != 3.5 || string(out) != `{"value":10}` {
			t.Fatalf("re-run with input: usage %v, third %s", m["totalUsage"], out)
		}
		spent += 3.5
	})
	t.Run("bad requests", func(t *testing.T) {
		wantErrorBody(t, c.post("/v1/sdk/workflows/executions/"+origID+"/rerun", `{"fromStage": "nope"}`), http.StatusBadRequest, "fromStage")
		wantErrorBody(t, c.post("/v1/sdk/workflows/executions/"+origID+"/rerun", `{"input": [1]}`), http.StatusBadRequest, "input")
		wantErrorBody(t, c.post("/v1/sdk/workflows/executions/00000000-0000-0000-0000-000000000000/rerun", ""), http.StatusNotFound, "")
	})
	t.Run("one FOR_EACH iteration: the others are reused", func(t *testing.T) {
		each := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "each", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 2}},
			{"id": "work", "module": "core.echo"}],
		  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item"}}]}`)["id"].(string)
		first := pollRun(t, c, c.trigger(t, each, `{"items": [10, 11, 12]}`), 30*time.Second, terminal)
		m := pollRun(t, c, c.rerun(t, first["id"].(string), `{"fromStage": "each", "iteration": 1}`), 30*time.Second, terminal)
		reused := 0
		for _, s := range stages(m) {
			if s["reused"] == true {
				reused++
				if s["referenceId"] != "work" || s["iteration"] == float64(1) || s["creditUsage"] != float64(0) {
					t.Fatalf("reused stage %v", s)
				}
			}
		}
		if m["status"] != "COMPLETED" || m["totalUsage"] != float64(1) || reused != 2 || len(stages(m)) != 5 {
			t.Fatalf("re-run of one iteration: %s, usage %v, %d reused of %d stages", m["status"], m["totalUsage"], reused, len(stages(m)))
		}
		wantErrorBody(t, c.post("/v1/sdk/workflows/executions/"+first["id"].(string)+"/rerun", `{"fromStage": "each", "iteration": 3}`), http.StatusBadRequest, "iteration")
		spent += first["totalUsage"].(float64) + 1
	})
	t.Run("one iteration of a gathered FOR_EACH whose service was down: the gather runs again with it", func(t *testing.T) {
		var mu sync.Mutex
		down, hits := true, map[string]int{}
		prices := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sku := r.URL.Query().Get("sku")
			mu.Lock()
			hits[sku]++
			fail := down && sku == "b"
			mu.Unlock()
			if fail {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"sku": %q}`, sku)
		}))
		defer prices.Close()
		wf := svc.createWorkflow(t, svc.key.WorkspaceID, fmt.Sprintf(`{"name": "basket prices", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "each", "module": "FOR_EACH", "config": {"items": "skus", "body": ["fetch", "line"], "onFailure": "continue"}},
			{"id": "fetch", "module": "http.request", "config": {"url": %q, "failOnHttpError": true}},
			{"id": "line", "module": "core.echo"},
			{"id": "total", "module": "core.echo"}],
		  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "fetch", "mapping": {"query": "item"}},
			{"from": "fetch", "to": "line", "mapping": {"sku": "body.sku"}},
			{"from": "line", "to": "total", "mapping": {"lines": "items", "failed": "failed"}}]}`, prices.URL))["id"].(string)
		first := pollRun(t, c, c.trigger(t, wf, `{"skus": [{"sku": "a"}, {"sku": "b"}, {"sku": "c"}]}`), 30*time.Second, terminal)
		if got := stagesOf(t, first, "total")[-1]; first["status"] != "COMPLETED" || got != `COMPLETED {"failed":[1],"lines":[{"sku":"a"},null,{"sku":"c"}]}` {
			t.Fatalf("first run %s, total %s", first["status"], got)
		}
		spent += first["totalUsage"].(float64)
		mu.Lock()
		down = false
		mu.Unlock()
		m := pollRun(t, c, c.rerun(t, first["id"].(string), `{"fromStage": "each", "iteration": 1}`), 30*time.Second, terminal)
		if got := stagesOf(t, m, "total")[-1]; m["status"] != "COMPLETED" || got != `COMPLETED {"failed":[],"lines":[{"sku":"a"},{"sku":"b"},{"sku":"c"}]}` {
			t.Fatalf("re-run %s, total %s", m["status"], got)
		}
		for _, s := range stages(m) {
			wantReused := (s["referenceId"] == "fetch" || s["referenceId"] == "line") && s["iteration"] != float64(1)
			if s["reused"] != wantReused || s["status"] != "COMPLETED" {
				t.Fatalf("stage %s iteration %v: %s, reused %v; want reused %v", s["referenceId"], s["iteration"], s["status"], s["reused"], wantReused)
			}
		}
		if m["totalUsage"] != float64(5+1+1) || m["failedStageCount"] != float64(0) || len(stages(m)) != 1+1+3*2+1 {
			t.Fatalf("re-run usage %v (want fetch 5 + line 1 + total 1), %v failed, %d stages", m["totalUsage"], m["failedStageCount"], len(stages(m)))
		}
		spent += m["totalUsage"].(float64)

		// From the gather: the loop's iterations, all completed upstream of it, are copied.
		g := pollRun(t, c, c.rerun(t, m["id"].(string), `{"fromStage": "total"}`), 30*time.Second, terminal)
		if got := stagesOf(t, g, "total")[-1]; g["status"] != "COMPLETED" || got != `COMPLETED {"failed":[],"lines":[{"sku":"a"},{"sku":"b"},{"sku":"c"}]}` {
			t.Fatalf("re-run from the gather %s, total %s", g["status"], got)
		}
		for _, s := range stages(g) {
			wantReused := s["referenceId"] == "fetch" || s["referenceId"] == "line"
			if s["reused"] != wantReused || s["status"] != "COMPLETED" {
				t.Fatalf("re-run from the gather: stage %s iteration %v: %s, reused %v; want reused %v", s["referenceId"], s["iteration"], s["status"], s["reused"], wantReused)
			}
		}
		if g["totalUsage"] != float64(1) || len(stages(g)) != 1+1+3*2+1 {
			t.Fatalf("re-run from the gather: usage %v (want total's 1 alone), %d stages", g["totalUsage"], len(stages(g)))
		}
		spent += g["totalUsage"].(float64)
		mu.Lock()
		defer mu.Unlock()
		if !maps.Equal(hits, map[string]int{"a": 1, "b": 2, "c": 1}) {
			t.Fatalf("the price service was called %v times, want a and c once, b twice", hits)
		}
	})
	t.Run("a run that has not ended is 409", func(t *testing.T) {
		slow := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "slow", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "wait", "module": "core.delay", "config": {"ms": 2000}}],
		  "edges": [{"from": "t", "to": "wait"}]}`)["id"].(string)
		id := c.trigger(t, slow, "")
		wantErrorBody(t, c.post("/v1/sdk/workflows/executions/"+id+"/rerun", ""), http.StatusConflict, "not ended")
		spent += pollRun(t, c, id, 30*time.Second, terminal)["totalUsage"].(float64)
	})

	if total := stopAndAudit(t, svc.cli, svc.srv, svc.key.WorkspaceID); total != 1000-spent {
		t.Fatalf("balance %v after runs using %v credits, want %v", total, spent, 1000-spent)
	}
}
