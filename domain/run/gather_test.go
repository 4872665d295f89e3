package run_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
)

// gatherLoop: each item goes through a (which fails for an item with "fail": true) then b,
// taken only when the item says "go"; g gathers b after the loop and h follows g.
func gatherLoop(cfg string) string {
	return `{"name": "gather", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "each", "module": "FOR_EACH", "config": ` + cfg + `},
	{"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"},
	{"id": "g", "module": "core.echo"}, {"id": "h", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "each", "when": "trigger.loop"},
	{"from": "each", "to": "a", "mapping": {"v": "item.v", "go": "item.go", "fail": "item.fail"}},
	{"from": "a", "to": "b", "when": "output.go", "mapping": {"v": "v"}},
	{"from": "b", "to": "g"}, {"from": "g", "to": "h", "mapping": {"failed": "failed"}}]}`
}

// playAll runs every dispatched stage (failing those whose input asks to) until the run waits
// for nothing, and returns the log and the input each component last ran with.
func (h *harness) playAll() ([]domain.Event, map[string]string) {
	log := []domain.Event{}
	inputs := map[string]string{}
	step := func(facts ...run.Fact) []run.Stage {
		h.at = h.at.Add(1)
		events, d := run.Step(h.s, facts, cond, h.at)
		h.apply(events)
		log = append(log, events...)
		return d
	}
	for d := step(); len(d) > 0; {
		var facts []run.Fact
		for _, st := range d {
			in := h.inputOf(st)
			inputs[st.ComponentID] = in
			if strings.Contains(in, `"fail":true`) {
				facts = append(facts, run.Fact{ExecutionID: st.ExecutionID, Kind: run.FactFailed, Error: json.RawMessage(`{"code":"boom"}`), At: t0})
				continue
			}
			facts = append(facts, done(st, in))
		}
		d = step(facts...)
	}
	return log, inputs
}

func TestGatherAfterForEach(t *testing.T) {
	const items = `[{"v": 1, "go": true}, {"v": 2, "go": true, "fail": true}, {"v": 3, "go": false}, {"v": 4, "go": true}]`
	cases := []struct {
		name, cfg, trigger string
		status             run.Status
		each               string // the FOR_EACH stage's status and output or error code
		g, h               string // the inputs g and h ran with ("" : did not run)
		skipped            []string
		failedStages       int // FAILED stages, tolerated ones included
	}{
		{"continue: the failure is listed, a skipped b gathers null", `{"items": "items", "body": ["a", "b"], "onFailure": "continue", "concurrency": 2}`,
			`{"loop": true, "items": ` + items + `}`, run.StatusCompleted, `COMPLETED {"count":4,"failed":[1]}`,
			`{"failed":[1],"items":[{"v":1},null,null,{"v":4}]}`, `{"failed":[1]}`, []string{"b"}, 1},
		{"fail (default): the first failure fails the FOR_EACH and the run", `{"items": "items", "body": ["a", "b"], "concurrency": 1}`,
			`{"loop": true, "items": ` + items + `}`, run.StatusFailed, `FAILED iteration_failed`, "", "", nil, 2},
		{"continue without failures", `{"items": "items", "body": ["a", "b"], "onFailure": "continue"}`,
			`{"loop": true, "items": [{"v": 1, "go": true}, {"v": 2, "go": true}]}`, run.StatusCompleted, `COMPLETED {"count":2,"failed":[]}`,
			`{"failed":[],"items":[{"v":1},{"v":2}]}`, `{"failed":[]}`, nil, 0},
		{"no items: the gather runs over nothing", `{"items": "items", "body": ["a", "b"]}`,
			`{"loop": true, "items": []}`, run.StatusCompleted, `COMPLETED {"count":0,"failed":[]}`, `{"failed":[],"items":[]}`, `{"failed":[]}`, nil, 0},
		{"a skipped FOR_EACH skips the gather", `{"items": "items", "body": ["a", "b"]}`,
			`{"loop": false}`, run.StatusCompleted, `COMPLETED null`, "", "", []string{"each", "g", "h"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := start(t, def(t, gatherLoop(c.cfg)), c.trigger)
			log, inputs := h.playAll()
			if h.s.Status != c.status || h.s.Pending != 0 || h.s.Detail().FailedStageCount != c.failedStages {
				t.Fatalf("run %s pending %d failed %d (%s), want %s, %d failed", h.s.Status, h.s.Pending, h.s.Detail().FailedStageCount, h.s.Error, c.status, c.failedStages)
			}
			if inputs["g"] != c.g || inputs["h"] != c.h {
				t.Fatalf("g ran with %q, h with %q; want %q, %q", inputs["g"], inputs["h"], c.g, c.h)
			}
			var skipped []string
			for _, st := range h.s.Stages {
				switch {
				case st.ComponentID == "each":
					got := string(st.Status) + " " + string(st.Output)
					if st.Status == run.StageStatusFailed {
						var f struct{ Code string }
						_ = json.Unmarshal(st.Error, &f)
						got = string(st.Status) + " " + f.Code
					}
					if got != c.each {
						t.Fatalf("FOR_EACH %s, want %s", got, c.each)
					}
				case (st.ComponentID == "g" || st.ComponentID == "h") && st.Iteration != run.NoIteration:
					t.Fatalf("stage %s runs in iteration %d, want once after the loop", st.ComponentID, st.Iteration)
				}
				if st.Skipped {
					skipped = append(skipped, st.ComponentID)
				}
			}
			if !sameSet(skipped, c.skipped) {
				t.Fatalf("skipped %v, want %v", skipped, c.skipped)
			}
			assertReplays(t, h.s, log)
		})
	}
}

// assertReplays folds the decoded log after the trigger onto the trigger's state and compares.
func assertReplays(t *testing.T, want run.State, log []domain.Event) {
	t.Helper()
	events, _ := run.DecideTrigger(run.State{}, want.ID, want.WorkspaceID, want.WorkflowID, "", want.TriggerID, want.Definition, want.Input, "", cond, t0)
	assertFolds(t, want, append(events, log...))
}

// assertFolds folds the decoded events, from the run's start, and compares with want.
func assertFolds(t *testing.T, want run.State, log []domain.Event) {
	t.Helper()
	replayed := run.State{}
	for _, e := range log {
		data, _ := json.Marshal(e)
		back, err := domain.Events.Decode(e.EventType(), data)
		if err != nil {
			t.Fatal(err)
		}
		replayed = replayed.Evolve(back)
	}
	got, _ := json.Marshal(replayed.Detail())
	exp, _ := json.Marshal(want.Detail())
	if string(got) != string(exp) {
		t.Fatalf("replayed %s\nwant %s", got, exp)
	}
}

// A FOR_EACH after a gather iterates over the gathered outputs.
func TestForEachOverAGather(t *testing.T) {
	d := def(t, `{"name": "twice", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "body": ["a"]}},
		{"id": "a", "module": "core.echo"},
		{"id": "again", "module": "FOR_EACH", "config": {"items": "items"}},
		{"id": "c", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "a", "mapping": {"n": "item"}},
		{"from": "a", "to": "again"}, {"from": "again", "to": "c", "mapping": {"m": "item.n"}}]}`)
	h := start(t, d, `{"items": [5, 6, 7]}`)
	_, _ = h.playAll()
	var got []string
	for _, st := range h.s.Stages {
		if st.ComponentID == "c" {
			got = append(got, string(st.Output))
		}
	}
	if h.s.Status != run.StatusCompleted || !sameSet(got, []string{`{"m":5}`, `{"m":6}`, `{"m":7}`}) {
		t.Fatalf("run %s (%s), c ran with %v", h.s.Status, h.s.Error, got)
	}
}

// nested: for each group, name it and run w once per x of the group with the group's name
// (inner loop, onFailure fail by default); total gathers the group's w outputs inside the outer iteration, report
// gathers the totals after the outer loop (onFailure continue).
const nested = `{"name": "nested", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "outer", "module": "FOR_EACH", "config": {"items": "groups", "body": ["name", "inner", "w", "total"], "onFailure": "continue"}},
	{"id": "name", "module": "core.echo"},
	{"id": "inner", "module": "FOR_EACH", "config": {"items": "item.xs", "body": ["w"]}},
	{"id": "w", "module": "core.echo"},
	{"id": "total", "module": "core.echo"},
	{"id": "report", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "outer"}, {"from": "outer", "to": "name", "mapping": {"g": "item.name"}},
	{"from": "outer", "to": "inner"}, {"from": "inner", "to": "w", "mapping": {"x": "item"}}, {"from": "name", "to": "w", "mapping": {"group": "g"}},
	{"from": "w", "to": "total", "mapping": {"xs": "items", "failed": "failed"}}, {"from": "name", "to": "total"},
	{"from": "total", "to": "report"}]}`

func TestNestedForEach(t *testing.T) {
	h := start(t, def(t, nested), `{"groups": [{"name": "a", "xs": [1, 2]}, {"name": "b", "xs": [3, {"fail": true}]}, {"name": "c", "xs": []}]}`)
	log, inputs := h.playAll()
	if h.s.Status != run.StatusCompleted || h.s.Pending != 0 || h.s.Detail().FailedStageCount != 2 {
		t.Fatalf("run %s pending %d failed %d (%s)", h.s.Status, h.s.Pending, h.s.Detail().FailedStageCount, h.s.Error)
	}
	const want = `{"failed":[1],"items":[{"failed":[],"g":"a","xs":[{"group":"a","x":1},{"group":"a","x":2}]},null,{"failed":[],"g":"c","xs":[]}]}`
	if inputs["report"] != want {
		t.Fatalf("report ran with %s\nwant %s", inputs["report"], want)
	}
	outer, _ := h.s.Stage(run.StageID("run-1", "outer", run.NoIteration))
	inners := map[int]run.Stage{}
	ids := map[string]bool{}
	for _, st := range h.s.Stages {
		if ids[st.ID] {
			t.Fatalf("two stages named %s", st.ID)
		}
		ids[st.ID] = true
		if st.ComponentID == "inner" {
			inners[st.Iteration] = st
			if st.ParentStageID != outer.ID {
				t.Fatalf("inner FOR_EACH stage %+v, want parent %s", st, outer.ID)
			}
		}
	}
	if inners[1].Status != run.StageStatusFailed || !strings.Contains(string(inners[1].Error), "iteration_failed") {
		t.Fatalf("inner loop of group b: %s %s", inners[1].Status, inners[1].Error)
	}
	var w []string
	for _, st := range h.s.Stages {
		if st.ComponentID == "w" {
			parent, _ := h.s.Stage(st.ParentStageID)
			if parent.ComponentID != "inner" {
				t.Fatalf("w stage %+v has parent %+v", st, parent)
			}
			w = append(w, strings.Join([]string{string(rune('0' + parent.Iteration)), string(rune('0' + st.Iteration)), string(st.Status)}, "/"))
		}
	}
	if !sameSet(w, []string{"0/0/COMPLETED", "0/1/COMPLETED", "1/0/COMPLETED", "1/1/FAILED"}) {
		t.Fatalf("w stages (outer/inner/status) %v", w)
	}
	assertReplays(t, h.s, log)
}
