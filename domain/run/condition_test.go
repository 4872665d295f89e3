package run_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

// cond stands in for the expression language: "output.PATH" or "trigger.PATH" holds when the
// value at PATH is true.
func cond(e workflow.Edge, output, trigger json.RawMessage) bool {
	doc, path := output, strings.TrimPrefix(e.When, "output.")
	if p, ok := strings.CutPrefix(e.When, "trigger."); ok {
		doc, path = trigger, p
	}
	v, _ := workflow.Lookup(doc, path)
	return string(v) == "true"
}

// branches: t feeds a (then b) when trigger.left and c when trigger.right; j joins b and c, and
// d follows a when a's output says so.
const branches = `{"name": "branches", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "a", "module": "core.echo"},
	{"id": "b", "module": "core.echo"},
	{"id": "c", "module": "core.echo"},
	{"id": "j", "module": "core.echo"},
	{"id": "d", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "a", "when": "trigger.left"}, {"from": "a", "to": "b", "mapping": {"fromB": "left"}},
	{"from": "t", "to": "c", "when": "trigger.right", "mapping": {"fromC": "right"}},
	{"from": "b", "to": "j"}, {"from": "c", "to": "j"}, {"from": "a", "to": "d", "when": "output.go"}]}`

// echoAll completes every dispatched stage with its input, as core.echo would, until the run
// waits for nothing; it returns the input each module stage ran with, by component.
func (h *harness) echoAll() map[string]string {
	inputs := map[string]string{}
	for d := h.step(); len(d) > 0; {
		var facts []run.Fact
		for _, st := range d {
			in := h.inputOf(st)
			inputs[st.ComponentID] = in
			facts = append(facts, done(st, in))
		}
		d = h.step(facts...)
	}
	return inputs
}

func TestConditionsSkipAndJoin(t *testing.T) {
	cases := []struct {
		name, input string
		ran         map[string]string // component -> the input it ran with
		skipped     []string
	}{
		{"left only", `{"left": true, "right": false, "go": true}`,
			map[string]string{"a": `{"go":true,"left":true,"right":false}`, "b": `{"fromB":true}`, "j": `{"fromB":true}`,
				"d": `{"go":true,"left":true,"right":false}`}, []string{"c"}},
		{"right only: a skipped chain", `{"left": false, "right": true}`,
			map[string]string{"c": `{"fromC":true}`, "j": `{"fromC":true}`}, []string{"a", "b", "d"}},
		{"both: the join takes both", `{"left": true, "right": true, "go": false}`,
			map[string]string{"a": `{"go":false,"left":true,"right":true}`, "b": `{"fromB":true}`, "c": `{"fromC":true}`,
				"j": `{"fromB":true,"fromC":true}`}, []string{"d"}},
		{"neither: everything skipped", `{}`, map[string]string{}, []string{"a", "b", "c", "j", "d"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := start(t, def(t, branches), c.input)
			if got := h.echoAll(); !reflect.DeepEqual(got, c.ran) {
				t.Fatalf("ran %v, want %v", got, c.ran)
			}
			if h.s.Status != run.StatusCompleted || h.s.Pending != 0 || int(h.s.TotalUsage) != 1000*len(c.ran) {
				t.Fatalf("run %s pending %d usage %d, want COMPLETED, 0, %d", h.s.Status, h.s.Pending, h.s.TotalUsage, 1000*len(c.ran))
			}
			var skipped []string
			for _, st := range h.s.Detail().RunStages {
				if st.Skipped {
					skipped = append(skipped, st.ReferenceID)
					if st.Status != run.StageStatusCompleted || string(st.Output) != "null" || st.CreditUsage != 0 || st.ExecutionEventID != nil {
						t.Errorf("skipped stage %s: %+v", st.ReferenceID, st)
					}
				}
			}
			if !sameSet(skipped, c.skipped) {
				t.Fatalf("skipped %v, want %v", skipped, c.skipped)
			}
			if len(h.s.Stages) != 1+len(c.ran)+len(c.skipped) {
				t.Fatalf("%d stages, want one per component", len(h.s.Stages))
			}
		})
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

func TestConditionsInsideALoopBodyDecidePerIteration(t *testing.T) {
	d := def(t, `{"name": "loop", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items"}},
		{"id": "w1", "module": "core.echo"}, {"id": "w2", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "w1", "mapping": {"n": "item"}},
		{"from": "w1", "to": "w2", "when": "output.n"}]}`)
	h := start(t, d, `{"items": [true, false, true]}`)
	h.echoAll()
	if h.s.Status != run.StatusCompleted {
		t.Fatalf("run %s: %s", h.s.Status, h.s.Error)
	}
	var w2 []string
	for _, st := range h.s.Stages {
		if st.ComponentID == "w2" {
			w2 = append(w2, map[bool]string{true: "skipped", false: "ran"}[st.Skipped])
		}
		if st.ComponentID == "each" && string(st.Output) != `{"count":3}` {
			t.Fatalf("FOR_EACH output %s", st.Output)
		}
	}
	if !sameSet(w2, []string{"ran", "skipped", "ran"}) || int(h.s.TotalUsage) != 5000 {
		t.Fatalf("w2 %v usage %d, want two ran, one skipped, 5 stages billed", w2, h.s.TotalUsage)
	}
}

// A replay folds the recorded answers: the events say which edges were taken, so a fold of the
// stored log gives the same run whatever the conditions would say now.
func TestConditionsAreRecordedForReplay(t *testing.T) {
	events, err := run.DecideTrigger(run.State{}, "run-1", "ws", "wf", "", "t", def(t, branches), json.RawMessage(`{"left": true}`), "", cond, t0)
	if err != nil {
		t.Fatal(err)
	}
	st := run.State{}
	log := append([]domain.Event(nil), events...)
	for _, e := range events {
		st = st.Evolve(e)
	}
	for round := 0; ; round++ {
		evs, d := run.Step(st, nil, cond, t0)
		var facts []run.Fact
		for _, e := range evs {
			st = st.Evolve(e)
		}
		log = append(log, evs...)
		for _, s := range d {
			facts = append(facts, done(s, string(st.StageInput(s))))
		}
		if len(facts) == 0 {
			break
		}
		evs, _ = run.Step(st, facts, cond, t0)
		for _, e := range evs {
			st = st.Evolve(e)
		}
		log = append(log, evs...)
		if round > 20 {
			t.Fatal("the run does not end")
		}
	}
	replayed := run.State{}
	for _, e := range log {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := domain.Events.Decode(e.EventType(), data)
		if err != nil {
			t.Fatal(err)
		}
		replayed = replayed.Evolve(back) // folding never evaluates: no Condition is at hand
	}
	want, _ := json.Marshal(st.Detail())
	got, _ := json.Marshal(replayed.Detail())
	if string(got) != string(want) || !strings.Contains(string(got), `"skipped":true`) {
		t.Fatalf("replayed %s\nwant %s", got, want)
	}
}
