package run_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
)

// ran runs linear to its end: a and b complete, c fails when failC, else completes.
func ran(t *testing.T, failC bool) *harness {
	h := start(t, def(t, linear), `{"x": 7}`)
	d := h.step()
	for len(d) > 0 {
		st := d[0]
		if failC && st.ComponentID == "c" {
			d = h.step(run.Fact{ExecutionID: st.ExecutionID, Kind: run.FactFailed, Error: json.RawMessage(`{"code":"boom"}`), At: t0})
			continue
		}
		d = h.step(done(st, h.inputOf(st)))
	}
	if !h.s.Status.Terminal() {
		t.Fatalf("run did not end: %+v", h.s.Detail())
	}
	return h
}

// rerun starts run-2 as a re-run of h's run and returns its harness.
func rerun(t *testing.T, h *harness, r run.Rerun) *harness {
	t.Helper()
	events, err := run.DecideRerun(h.s, "run-2", "key", r, cond, t0)
	if err != nil {
		t.Fatal(err)
	}
	n := &harness{t: t, at: t0}
	n.apply(events)
	return n
}

func reusedComponents(s run.State) []string {
	var out []string
	for _, st := range s.Stages {
		if st.Reused {
			if st.CreditUsage != 0 || st.ExecutionID != "" || st.Status != run.StageStatusCompleted {
				panic("a reused stage ran or was charged")
			}
			out = append(out, st.ComponentID)
		}
	}
	return out
}

func TestRerunFromStageReusesWhatIsUpstream(t *testing.T) {
	h := ran(t, false)
	n := rerun(t, h, run.Rerun{FromStage: "c"})
	if got := reusedComponents(n.s); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("reused %v, want [a b]", got)
	}
	d := n.step()
	if len(d) != 1 || d[0].ComponentID != "c" || n.inputOf(d[0]) != `{"v":7}` {
		t.Fatalf("dispatched %+v", d)
	}
	n.step(done(d[0], `{"v":7}`))
	if n.s.Status != run.StatusCompleted || n.s.TotalUsage != 1000 || n.s.RerunOf != "run-1" {
		t.Fatalf("re-run %+v", n.s.Detail())
	}
	if v := n.s.Detail(); v.RerunOf == nil || *v.RerunOf != "run-1" || !v.RunStages[1].Reused || v.RunStages[3].Reused {
		t.Fatalf("detail %+v", v)
	}
}

func TestRerunWithoutFromStageRestartsTheFailedStages(t *testing.T) {
	h := ran(t, true)
	n := rerun(t, h, run.Rerun{})
	if got := reusedComponents(n.s); len(got) != 2 {
		t.Fatalf("reused %v, want [a b]", got)
	}
	if d := n.step(); len(d) != 1 || d[0].ComponentID != "c" {
		t.Fatalf("dispatched %+v", d)
	}
}

func TestRerunWithInputRunsEverythingAgain(t *testing.T) {
	h := ran(t, true)
	n := rerun(t, h, run.Rerun{Input: json.RawMessage(`{"x": 8}`)})
	if got := reusedComponents(n.s); len(got) != 0 {
		t.Fatalf("reused %v, want none", got)
	}
	if d := n.step(); len(d) != 1 || d[0].ComponentID != "a" || n.inputOf(d[0]) != `{"x":8}` {
		t.Fatalf("dispatched %+v", d)
	}
}

func TestRerunNeverCopiesALoop(t *testing.T) {
	h := start(t, def(t, loop), `{"items": [1]}`)
	for d := h.step(); len(d) > 0; {
		d = h.step(done(d[0], `{}`))
	}
	n := rerun(t, h, run.Rerun{FromStage: "work"})
	if got := reusedComponents(n.s); len(got) != 0 {
		t.Fatalf("reused %v, want none", got)
	}
}

func TestRerunRefusesAnUnknownStageAndARunningRun(t *testing.T) {
	h := ran(t, false)
	if _, err := run.DecideRerun(h.s, "run-2", "", run.Rerun{FromStage: "nope"}, cond, t0); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("unknown fromStage: %v", err)
	}
	r := start(t, def(t, linear), `{}`)
	r.step()
	if _, err := run.DecideRerun(r.s, "run-2", "", run.Rerun{}, cond, t0); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("running run: %v", err)
	}
}

func TestRerunFoldsFromItsOwnEvents(t *testing.T) {
	h := ran(t, false)
	events, err := run.DecideRerun(h.s, "run-2", "", run.Rerun{FromStage: "c"}, cond, t0)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(events[0])
	var back run.Triggered
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if got := reusedComponents(run.State{}.Evolve(back)); len(got) != 2 {
		t.Fatalf("decoded re-run reused %v", got)
	}
}

func TestRerunOfOneIterationCopiesTheOthers(t *testing.T) {
	h := start(t, def(t, loop), `{"items": [10, 11, 12, 13]}`)
	for d := h.step(); len(d) > 0; {
		d = append(d[1:], h.step(done(d[0], h.inputOf(d[0])))...)
	}
	if h.s.Status != run.StatusCompleted {
		t.Fatalf("original %+v", h.s.Detail())
	}
	two := 2
	n := rerun(t, h, run.Rerun{FromStage: "each", Iteration: &two})
	d := n.step()
	if len(d) != 1 || d[0].ComponentID != "work" || d[0].Iteration != 2 || n.inputOf(d[0]) != `{"n":12}` {
		t.Fatalf("dispatched %+v", d)
	}
	var its []int
	for _, st := range n.s.Stages {
		if st.Reused {
			its = append(its, st.Iteration)
		}
	}
	if len(its) != 3 || its[0] != 0 || its[1] != 1 || its[2] != 3 {
		t.Fatalf("reused iterations %v, want [0 1 3]", its)
	}
	if more := n.step(done(d[0], `{}`)); len(more) != 0 {
		t.Fatalf("dispatched after the iteration: %+v", more)
	}
	if n.s.Status != run.StatusCompleted || n.s.TotalUsage != 1000 || string(n.s.Stages[1].Output) != `{"count":4}` {
		t.Fatalf("re-run %+v", n.s.Detail())
	}
}

func TestRerunRefusesAnIterationOutsideALoopItRan(t *testing.T) {
	h := start(t, def(t, loop), `{"items": [1]}`)
	for d := h.step(); len(d) > 0; {
		d = h.step(done(d[0], `{}`))
	}
	for _, r := range []run.Rerun{{FromStage: "work", Iteration: new(int)}, {Iteration: new(int)}, {FromStage: "each", Iteration: new(5)}} {
		if _, err := run.DecideRerun(h.s, "run-2", "", r, cond, t0); !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("%+v: %v", r, err)
		}
	}
}

// A re-run from the gather after a loop, or from the stages that did not complete, copies the
// loop's iterations whose body stages all completed (a skipped one included) instead of running
// and billing them again; a failed iteration runs again, and the gather gets what it got before.
func TestRerunAfterALoopCopiesItsCompletedIterations(t *testing.T) {
	const items = `[{"v": 1, "go": true}, {"v": 2, "go": true, "fail": true}, {"v": 3, "go": false}, {"v": 4, "go": true}]`
	h := start(t, def(t, gatherLoop(`{"items": "items", "body": ["a", "b"], "onFailure": "continue"}`)), `{"loop": true, "items": `+items+`}`)
	_, before := h.playAll()
	if h.s.Status != run.StatusCompleted {
		t.Fatalf("original %+v", h.s.Detail())
	}
	for _, r := range []run.Rerun{{FromStage: "g"}, {}} {
		started, err := run.DecideRerun(h.s, "run-2", "key", r, cond, t0)
		if err != nil {
			t.Fatal(err)
		}
		n := &harness{t: t, at: t0}
		n.apply(started)
		log, inputs := n.playAll()
		var its []string
		for _, st := range n.s.Stages {
			if st.Reused {
				its = append(its, fmt.Sprint(st.ComponentID, st.Iteration))
			}
		}
		if want := "[a0 b0 a2 b2 a3 b3]"; fmt.Sprint(its) != want {
			t.Fatalf("re-run %+v reused %v, want %s", r, its, want)
		}
		if n.s.Status != run.StatusCompleted || n.s.TotalUsage != 2000 || inputs["a"] != `{"fail":true,"go":true,"v":2}` || inputs["g"] != before["g"] {
			t.Fatalf("re-run %+v: %s, usage %d (want g and h alone), a ran with %s, g with %s (want %s)", r, n.s.Status, n.s.TotalUsage, inputs["a"], inputs["g"], before["g"])
		}
		assertFolds(t, n.s, append(started, log...))
	}
}
