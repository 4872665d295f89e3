package main

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
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
}
