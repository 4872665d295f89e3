package run_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

func waitDef(t *testing.T, config string) workflow.Definition {
	return def(t, `{"name": "wait", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "name": "hold", "config": `+config+`},
		{"id": "a", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "w"}, {"from": "w", "to": "a"}]}`)
}

// untilOf is the until evaluator of the tests: the input's "at" field.
func untilOf(_ string, input json.RawMessage) (time.Time, error) {
	var in struct {
		At time.Time `json:"at"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.At.IsZero() {
		return time.Time{}, errors.New("no at")
	}
	return in.At, nil
}

var evals = run.Eval{When: cond, Until: untilOf}

// stepAt steps the run at the given time.
func (h *harness) stepAt(at time.Time) []run.Stage {
	events, dispatched := run.StepWith(h.s, nil, evals, at)
	h.apply(events)
	return dispatched
}

func stageOf(t *testing.T, s run.State, component string) run.Stage {
	t.Helper()
	for _, st := range s.Stages {
		if st.ComponentID == component {
			return st
		}
	}
	t.Fatalf("no stage of %s in %+v", component, s.Detail())
	return run.Stage{}
}

func TestWaitForHoldsTheStageRunningUntilItsTime(t *testing.T) {
	h := start(t, waitDef(t, `{"for": "90m"}`), `{"x": 1}`)
	if d := h.stepAt(t0); len(d) != 0 {
		t.Fatalf("a wait dispatched %v", d)
	}
	w := stageOf(t, h.s, "w")
	if w.Status != run.StageStatusRunning || w.Waiting == nil || w.Waiting.Kind != "for" || !w.Waiting.Until.Equal(t0.Add(90*time.Minute)) {
		t.Fatalf("waiting stage: %+v %+v", w, w.Waiting)
	}
	if v := w.View(); v.WaitingFor == nil || v.CreditUsage != 0 || v.ExecutionEventID != nil {
		t.Fatalf("view: %+v", v)
	}
	if got := h.s.NextWait(); !got.Equal(t0.Add(90 * time.Minute)) {
		t.Fatalf("next wait %v", got)
	}
	if d := h.stepAt(t0.Add(90*time.Minute - time.Millisecond)); len(d) != 0 || stageOf(t, h.s, "w").Status != run.StageStatusRunning {
		t.Fatal("the wait ended early")
	}
	d := h.stepAt(t0.Add(90 * time.Minute))
	w = stageOf(t, h.s, "w")
	if w.Status != run.StageStatusCompleted || string(w.Output) != `{"x":1}` || len(d) != 1 || d[0].ComponentID != "a" {
		t.Fatalf("after its time: %+v, dispatched %v", w, d)
	}
	if w.View().WaitingFor != nil {
		t.Fatal("an ended wait still shows waitingFor")
	}
	if events, _ := run.StepWith(h.s, nil, evals, t0.Add(2*time.Hour)); len(events) != 0 {
		t.Fatalf("a second fire recorded %v", events)
	}
}

func TestWaitUntilTakesItsTimeFromTheInput(t *testing.T) {
	h := start(t, waitDef(t, `{"until": "at"}`), `{"at": "2026-11-23T08:00:00Z"}`)
	h.stepAt(t0)
	if w := stageOf(t, h.s, "w"); w.Waiting == nil || !w.Waiting.Until.Equal(time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("until: %+v", w.Waiting)
	}
	bad := start(t, waitDef(t, `{"until": "at"}`), `{}`)
	bad.stepAt(t0)
	if w := stageOf(t, bad.s, "w"); w.Status != run.StageStatusFailed || bad.s.Status != run.StatusFailed {
		t.Fatalf("an until giving no time: %+v, run %s", w, bad.s.Status)
	}
}

func TestSignalCompletesTheWaitingStageOrIsKeptUntilOneWaits(t *testing.T) {
	h := start(t, waitDef(t, `{"signal": {"name": "paid"}}`), `{}`)
	h.stepAt(t0)
	events, d, err := run.DecideSignal(h.s, run.Signal{Name: "paid", ID: "s1", Payload: json.RawMessage(`{"amount":5}`)}, evals, t0)
	if err != nil {
		t.Fatal(err)
	}
	h.apply(events)
	if w := stageOf(t, h.s, "w"); w.Status != run.StageStatusCompleted || string(w.Output) != `{"amount":5}` || len(d) != 1 {
		t.Fatalf("after the signal: %+v, dispatched %v", w, d)
	}
	if events, _, err := run.DecideSignal(h.s, run.Signal{Name: "paid", ID: "s1"}, evals, t0); err != nil || len(events) != 0 {
		t.Fatalf("the same id again: %v %v", events, err)
	}

	// The wait comes after a module stage: the signal arrives while that one runs.
	early := start(t, def(t, `{"name": "late", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "a", "module": "core.echo"}, {"id": "w", "module": "WAIT", "config": {"signal": {"name": "paid"}}}],
	  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "w"}]}`), `{}`)
	first := early.stepAt(t0)
	events, _, err = run.DecideSignal(early.s, run.Signal{Name: "paid", ID: "s0", Payload: json.RawMessage(`7`)}, evals, t0)
	if err != nil {
		t.Fatal(err)
	}
	early.apply(events)
	if len(early.s.Signals) != 1 {
		t.Fatalf("signals kept: %v", early.s.Signals)
	}
	early.step(done(first[0], `{}`))
	if w := stageOf(t, early.s, "w"); w.Status != run.StageStatusCompleted || string(w.Output) != `7` || len(early.s.Signals) != 0 {
		t.Fatalf("a kept signal was not consumed: %+v, kept %v", w, early.s.Signals)
	}
}

func TestSignalsKeptAreBounded(t *testing.T) {
	h := start(t, waitDef(t, `{"signal": {"name": "paid"}}`), `{}`)
	for i := range run.MaxSignals {
		events, _, err := run.DecideSignal(h.s, run.Signal{Name: "other", ID: string(rune('a'+i%26)) + string(rune('a'+i/26))}, evals, t0)
		if err != nil {
			t.Fatal(err)
		}
		h.apply(events)
	}
	_, _, err := run.DecideSignal(h.s, run.Signal{Name: "other", ID: "one-too-many"}, evals, t0)
	if !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("signal %d: %v, want a conflict", run.MaxSignals+1, err)
	}
	_, _, err = run.DecideSignal(h.s, run.Signal{Name: "", ID: "x"}, evals, t0)
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Field != "name" {
		t.Fatalf("no name: %v", err)
	}
}

func TestSignalTimeout(t *testing.T) {
	fail := start(t, waitDef(t, `{"signal": {"name": "paid", "timeout": "1h"}}`), `{}`)
	fail.stepAt(t0)
	fail.stepAt(t0.Add(time.Hour))
	if w := stageOf(t, fail.s, "w"); w.Status != run.StageStatusFailed || fail.s.Status != run.StatusFailed {
		t.Fatalf("onTimeout fail: %+v, run %s", w, fail.s.Status)
	}
	cont := start(t, waitDef(t, `{"approval": {"timeout": "1h", "onTimeout": "continue"}}`), `{}`)
	cont.stepAt(t0)
	cont.stepAt(t0.Add(time.Hour))
	if w := stageOf(t, cont.s, "w"); w.Status != run.StageStatusCompleted || string(w.Output) != `{"approved":false,"by":null,"comment":null,"timedOut":true}` {
		t.Fatalf("onTimeout continue: %+v", w)
	}
}

func TestApprovalDecidesOnce(t *testing.T) {
	h := start(t, waitDef(t, `{"approval": {"question": "Ship it?"}}`), `{}`)
	h.stepAt(t0)
	w := stageOf(t, h.s, "w")
	if w.Waiting == nil || w.Waiting.Question != "Ship it?" || w.Waiting.Until != nil {
		t.Fatalf("approval waiting: %+v", w.Waiting)
	}
	events, d, err := run.DecideApproval(h.s, w.ID, run.Approval{Approved: true, By: "ana", Comment: "ok"}, evals, t0)
	if err != nil {
		t.Fatal(err)
	}
	h.apply(events)
	if w := stageOf(t, h.s, "w"); string(w.Output) != `{"approved":true,"by":"ana","comment":"ok"}` || len(d) != 1 {
		t.Fatalf("approved: %s, dispatched %v", w.Output, d)
	}
	if _, _, err := run.DecideApproval(h.s, w.ID, run.Approval{}, evals, t0); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("second decision: %v, want a conflict", err)
	}
}

func TestWaitConfigErrorsNameTheField(t *testing.T) {
	for config, field := range map[string]string{
		`{}`:                          "config",
		`{"for": "1h", "until": "x"}`: "config",
		`{"for": "500ms"}`:            "config.for",
		`{"for": "366d"}`:             "config.for",
		`{"signal": {}}`:              "config.signal.name",
		`{"signal": {"name": "a", "timeout": "x"}}`: "config.signal.timeout",
		`{"approval": {"onTimeout": "retry"}}`:      "config.approval.onTimeout",
		`{"sleep": "1h"}`:                           "config",
	} {
		_, err := workflow.ParseWait(json.RawMessage(config))
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: %v, want an error naming %s", config, err, field)
		}
	}
	for _, ok := range []string{`{"for": "1s"}`, `{"for": "365d"}`, `{"until": "payload.at"}`, `{"signal": {"name": "a", "timeout": "7d", "onTimeout": "continue"}}`, `{"approval": {}}`} {
		if _, err := workflow.ParseWait(json.RawMessage(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestAnUntilThatRunsOutOfTimeWaitsForTheNextStep(t *testing.T) {
	h := start(t, waitDef(t, `{"until": "at"}`), `{"at": "2026-11-23T08:00:00Z"}`)
	busy := run.Eval{When: cond, Until: func(string, json.RawMessage) (time.Time, error) { return time.Time{}, run.ErrEvaluationTimedOut }}
	events, _ := run.StepWith(h.s, nil, busy, t0)
	h.apply(events)
	if w := stageOf(t, h.s, "w"); w.Status != run.StageStatusCreated || h.s.Status.Terminal() {
		t.Fatalf("after a timed-out evaluation: stage %s, run %s", w.Status, h.s.Status)
	}
	h.stepAt(t0)
	if w := stageOf(t, h.s, "w"); w.Waiting == nil || w.Status != run.StageStatusRunning {
		t.Fatalf("the next step did not start the wait: %+v", w)
	}
}

func TestWaitsInsideAForEachEndTheirIterations(t *testing.T) {
	h := start(t, def(t, `{"name": "loop-wait", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 2}},
		{"id": "w", "module": "WAIT", "config": {"for": "1m"}}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "w", "mapping": {"n": "item"}}]}`), `{"items": [1, 2, 3]}`)
	h.stepAt(t0)
	for i := 1; i <= 3 && !h.s.Status.Terminal(); i++ {
		h.stepAt(t0.Add(time.Duration(i) * time.Minute))
	}
	if h.s.Status != run.StatusCompleted || h.s.TotalUsage != 0 {
		t.Fatalf("run %s usage %v: %+v", h.s.Status, h.s.TotalUsage, h.s.Detail())
	}
	waits := 0
	for _, st := range h.s.Stages {
		if st.ComponentID == "w" && st.Status == run.StageStatusCompleted {
			waits++
		}
	}
	if waits != 3 {
		t.Fatalf("%d iterations waited, want 3", waits)
	}
}

func TestAFailingBranchDoesNotWaitForAWait(t *testing.T) {
	h := start(t, def(t, `{"name": "fail-beside", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"signal": {"name": "never"}}}, {"id": "a", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "w"}, {"from": "t", "to": "a"}]}`), `{}`)
	d := h.stepAt(t0)
	if len(d) != 1 {
		t.Fatalf("dispatched %v", d)
	}
	events, _ := run.StepWith(h.s, []run.Fact{{ExecutionID: d[0].ExecutionID, Kind: run.FactFailed, Error: json.RawMessage(`{"code":"x"}`), At: t0}}, evals, t0)
	h.apply(events)
	if h.s.Status != run.StatusFailed || stageOf(t, h.s, "w").Status != run.StageStatusFailed {
		t.Fatalf("run %s, wait %s: a failed run should abandon its waits", h.s.Status, stageOf(t, h.s, "w").Status)
	}
}
