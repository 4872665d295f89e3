package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// whenDef branches on the trigger: "left" runs a then b, "right" runs c; join gathers b and
// c. Every stage is core.echo (1 credit).
const whenDef = `{"name": "conditions", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "a", "module": "core.echo"},
	{"id": "b", "module": "core.echo"},
	{"id": "c", "module": "core.echo"},
	{"id": "join", "module": "core.echo"}],
  "edges": [
	{"from": "t", "to": "a", "when": "trigger.route == \"left\""},
	{"from": "a", "to": "b", "mapping": {"viaLeft": "route"}},
	{"from": "t", "to": "c", "when": "trigger.route == \"right\" && trigger.n > 1", "mapping": {"viaRight": "n"}},
	{"from": "b", "to": "join"},
	{"from": "c", "to": "join"}]}`

func TestWorkflowConditionsBlackBox(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, whenDef)
	id := wf["id"].(string)
	spent := 0.0

	// check asserts which components ran (with their output) and which were skipped.
	check := func(t *testing.T, m map[string]any, ran map[string]string, skipped []string) {
		t.Helper()
		if m["status"] != "COMPLETED" || len(stages(m)) != 1+len(ran)+len(skipped) || m["totalUsage"] != float64(len(ran)) {
			t.Fatalf("run %s, %d stages, usage %v; want COMPLETED, %d, %d", m["status"], len(stages(m)), m["totalUsage"], 1+len(ran)+len(skipped), len(ran))
		}
		for comp, want := range ran {
			s := stageOf(t, m, comp)
			out, _ := json.Marshal(s["output"])
			if s["status"] != "COMPLETED" || s["skipped"] != false || string(out) != want || s["creditUsage"] != float64(1) || s["executionEventId"] == nil {
				t.Fatalf("stage %s: %v (output %s, want %s)", comp, s, out, want)
			}
		}
		for _, comp := range skipped {
			s := stageOf(t, m, comp)
			if s["status"] != "COMPLETED" || s["skipped"] != true || s["output"] != nil || s["creditUsage"] != float64(0) || s["executionEventId"] != nil {
				t.Fatalf("skipped stage %s: %v", comp, s)
			}
		}
		spent += m["totalUsage"].(float64)
	}

	t.Run("a false edge skips a chain of two; the join runs with the taken input only", func(t *testing.T) {
		m := pollRun(t, c, c.trigger(t, id, `{"route": "right", "n": 5}`), 30*time.Second, terminal)
		check(t, m, map[string]string{"c": `{"viaRight":5}`, "join": `{"viaRight":5}`}, []string{"a", "b"})
	})
	t.Run("a true edge runs", func(t *testing.T) {
		m := pollRun(t, c, c.trigger(t, id, `{"route": "left"}`), 30*time.Second, terminal)
		check(t, m, map[string]string{"a": `{"route":"left"}`, "b": `{"viaLeft":"left"}`, "join": `{"viaLeft":"left"}`}, []string{"c"})
	})
	t.Run("no edge taken: skipping flows through the join", func(t *testing.T) {
		m := pollRun(t, c, c.trigger(t, id, `{"route": "right", "n": 1}`), 30*time.Second, terminal)
		check(t, m, map[string]string{}, []string{"a", "b", "c", "join"})
	})

	t.Run("the worked example of docs/workflows.md gives the stages it shows", func(t *testing.T) {
		doc, err := os.ReadFile("../../docs/workflows.md")
		if err != nil {
			t.Fatal(err)
		}
		var def string
		for _, b := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
			if strings.Contains(b[1], `"name": "Route order"`) {
				def = b[1]
			}
		}
		if def == "" {
			t.Fatal("docs/workflows.md has no Route order example")
		}
		route := svc.createWorkflow(t, svc.key.WorkspaceID, def)["id"].(string)
		m := pollRun(t, c, c.trigger(t, route, `{"amount": 50, "country": "FR"}`), 30*time.Second, terminal)
		if m["status"] != "COMPLETED" || m["totalUsage"] != 3.5 {
			t.Fatalf("run %s, usage %v; want COMPLETED, 3.5", m["status"], m["totalUsage"])
		}
		want := map[string]string{"score": `{"result":0.1}`, "review": "skipped", "express": `{"risk":0.1}`,
			"notify": "skipped", "done": `{"express":0.1}`}
		for comp, w := range want {
			s := stageOf(t, m, comp)
			out, _ := json.Marshal(s["output"])
			got := string(out)
			if s["skipped"] == true {
				got = "skipped"
			}
			if s["status"] != "COMPLETED" || got != w {
				t.Errorf("stage %s: %s %s, want COMPLETED %s", comp, s["status"], got, w)
			}
		}
		spent += m["totalUsage"].(float64)
		m = pollRun(t, c, c.trigger(t, route, `{"amount": 5000}`), 30*time.Second, terminal)
		if out, _ := json.Marshal(stageOf(t, m, "done")["output"]); string(out) != `{"message":"Review order 0.9"}` || stageOf(t, m, "express")["skipped"] != true {
			t.Fatalf("the other branch: done %s, express %v", out, stageOf(t, m, "express"))
		}
		spent += m["totalUsage"].(float64)
	})

	// Skipped stages were never charged: the workspace paid for the stages that ran, no more.
	if spent != 5+3.5+5 { // the example's second run: score 1.5, review 1, notify 1.5, done 1
		t.Fatalf("the runs used %v credits, want 13.5", spent)
	}
	if total := stopAndAudit(t, svc.cli, svc.srv, svc.key.WorkspaceID); total != 1000-spent {
		t.Fatalf("balance %v after runs using %v credits, want %v", total, spent, 1000-spent)
	}
}
