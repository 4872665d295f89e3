package run_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func def(t *testing.T, js string) workflow.Definition {
	t.Helper()
	var d workflow.Definition
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	d.Normalize(func() string { return "x" })
	if err := d.Validate(func(string, json.RawMessage) error { return nil }); err != nil {
		t.Fatalf("definition: %v", err)
	}
	return d
}

const linear = `{"name": "linear", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "a", "module": "core.echo"},
	{"id": "b", "module": "core.echo"},
	{"id": "c", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "c", "mapping": {"v": "x"}}]}`

const loop = `{"name": "loop", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 3}},
	{"id": "work", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item"}}]}`

// harness folds a run and plays the executor's part.
type harness struct {
	t  *testing.T
	s  run.State
	at time.Time
}

func start(t *testing.T, d workflow.Definition, input string) *harness {
	events, err := run.DecideTrigger(run.State{}, "run-1", "ws", "wf", "", "t", d, json.RawMessage(input), "", cond, t0)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, at: t0}
	h.apply(events)
	return h
}

func (h *harness) apply(events []domain.Event) {
	for _, e := range events {
		h.s = h.s.Evolve(e)
	}
}

// step records facts and returns the module stages dispatched.
func (h *harness) step(facts ...run.Fact) []run.Stage {
	h.at = h.at.Add(time.Millisecond)
	events, dispatched := run.Step(h.s, facts, cond, h.at)
	h.apply(events)
	return dispatched
}

func done(st run.Stage, output string) run.Fact {
	return run.Fact{ExecutionID: st.ExecutionID, Kind: run.FactCompleted, Output: json.RawMessage(output), Usage: billing.Credits(1000), At: t0}
}

func TestLinearRunPassesOutputsDownstream(t *testing.T) {
	h := start(t, def(t, linear), `{"x": 7}`)
	if h.s.Status != run.StatusCreated || h.s.Pending != 0 || len(h.s.Stages) != 1 {
		t.Fatalf("after trigger: %+v", h.s.Detail())
	}
	d := h.step()
	for i, want := range []string{`{"x":7}`, `{"x":7}`, `{"v":7}`} {
		if len(d) != 1 {
			t.Fatalf("step %d dispatched %d stages", i, len(d))
		}
		st := d[0]
		if in := string(h.s.StageInput(st)); in != want {
			t.Fatalf("stage %d input %s, want %s", i, in, want)
		}
		if h.s.Status != run.StatusExecuting || h.s.Pending != 1 || st.Status != run.StageStatusCreated || st.Attempt != 1 {
			t.Fatalf("stage %d: run %s pending %d stage %s attempt %d", i, h.s.Status, h.s.Pending, st.Status, st.Attempt)
		}
		h.step(run.Fact{ExecutionID: st.ExecutionID, Kind: run.FactStarted, Attempt: 1, At: t0})
		if got, _ := h.s.Stage(st.ID); got.Status != run.StageStatusRunning {
			t.Fatalf("stage %d not running: %s", i, got.Status)
		}
		d = h.step(done(st, h.inputOf(st)))
	}
	if h.s.Status != run.StatusCompleted || h.s.TotalUsage != 3000 || h.s.Pending != 0 || len(h.s.Stages) != 4 {
		t.Fatalf("end: %+v", h.s.Detail())
	}
	if events, _ := run.Step(h.s, []run.Fact{done(h.s.Stages[1], `{}`)}, cond, t0); events != nil {
		t.Fatalf("a finished run took events: %v", events)
	}
}

func (h *harness) inputOf(st run.Stage) string { return string(h.s.StageInput(st)) }

func TestForEachBoundsParallelismAndCompletesEveryItem(t *testing.T) {
	h := start(t, def(t, loop), `{"items": [0, 1, 2, 3, 4, 5, 6]}`)
	open := h.step()
	seen := map[int]bool{}
	for len(open) > 0 {
		if len(open) > 3 {
			t.Fatalf("%d iterations in flight, concurrency is 3", len(open))
		}
		st := open[0]
		open = open[1:]
		if st.Iteration < 0 || st.ParentStageID == "" || seen[st.Iteration] {
			t.Fatalf("bad iteration stage %+v", st)
		}
		seen[st.Iteration] = true
		if in, want := h.inputOf(st), fmt.Sprintf(`{"n":%d}`, st.Iteration); in != want {
			t.Fatalf("iteration %d input %s, want %s", st.Iteration, in, want)
		}
		open = append(open, h.step(done(st, `{}`))...)
	}
	if len(seen) != 7 || h.s.Status != run.StatusCompleted || h.s.TotalUsage != 7000 {
		t.Fatalf("seen %v, run %+v", seen, h.s.Detail())
	}
	fe := h.s.Stages[1]
	if fe.Module != workflow.ModuleForEach || fe.Status != run.StageStatusCompleted || string(fe.Output) != `{"count":7}` {
		t.Fatalf("FOR_EACH stage %+v", fe)
	}
}

func TestForEachOverNothingOrNotAnArray(t *testing.T) {
	h := start(t, def(t, loop), `{"items": []}`)
	if d := h.step(); len(d) != 0 || h.s.Status != run.StatusCompleted {
		t.Fatalf("empty items: dispatched %d, status %s", len(d), h.s.Status)
	}
	h = start(t, def(t, loop), `{"items": "nope"}`)
	h.step()
	if h.s.Status != run.StatusFailed || h.s.Failed != 1 {
		t.Fatalf("not an array: %+v", h.s.Detail())
	}
	var e struct{ Code string }
	_ = json.Unmarshal(h.s.Stages[1].Error, &e)
	if e.Code != "not_an_array" {
		t.Fatalf("FOR_EACH error %s", h.s.Stages[1].Error)
	}
}

func TestFailedStageEndsTheRunOnceRunningStagesFinish(t *testing.T) {
	h := start(t, def(t, loop), `{"items": [1, 2]}`)
	open := h.step()
	if len(open) != 2 {
		t.Fatalf("dispatched %d", len(open))
	}
	h.step(run.Fact{ExecutionID: open[0].ExecutionID, Kind: run.FactFailed, Error: json.RawMessage(`{"code":"x"}`), At: t0})
	if h.s.Status.Terminal() {
		t.Fatal("run ended while a stage still runs")
	}
	if d := h.step(done(open[1], `{}`)); len(d) != 0 {
		t.Fatalf("new stages after a failure: %d", len(d))
	}
	if h.s.Status != run.StatusFailed || h.s.Failed != 1 || h.s.TotalUsage != 1000 || h.s.Pending != 0 {
		t.Fatalf("end: %+v", h.s.Detail())
	}
	if fe := h.s.Stages[1]; fe.Status != run.StageStatusFailed {
		t.Fatalf("FOR_EACH left %s", fe.Status)
	}
}

func TestCancelEndsAtOnceAndIgnoresLateResults(t *testing.T) {
	h := start(t, def(t, linear), `{}`)
	d := h.step()
	events, err := run.DecideCancel(h.s, "enough", t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h.apply(events)
	det := h.s.Detail()
	if det.Status != run.StatusFailed || det.CancelRequestedAt == nil || det.CancelReason == nil || *det.CancelReason != "enough" {
		t.Fatalf("after cancel: %+v", det)
	}
	if det.FailedStageCount != 0 || det.PendingStageCount != 0 || det.RunStages[1].Status != run.StageStatusFailed {
		t.Fatalf("stages after cancel: %+v", det)
	}
	if events, _ := run.Step(h.s, []run.Fact{done(d[0], `{}`)}, cond, t0); events != nil {
		t.Fatal("late result recorded after cancel")
	}
	if _, err := run.DecideCancel(h.s, "", t0); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("second cancel: %v", err)
	}
	ev := h.s.StreamEvent()
	if ev.Status != run.StatusFailed || ev.Output.CancelRequestedAt == nil || ev.Error == nil {
		t.Fatalf("stream event %+v", ev)
	}
}

func TestRetriedAttemptShowsOnTheStage(t *testing.T) {
	h := start(t, def(t, linear), `{}`)
	st := h.step()[0]
	h.step(run.Fact{ExecutionID: st.ExecutionID, Kind: run.FactStarted, Attempt: 1, At: t0})
	h.step(run.Fact{ExecutionID: st.ExecutionID, Kind: run.FactStarted, Attempt: 2, At: t0})
	got, _ := h.s.Stage(st.ID)
	if got.Attempt != 2 || got.Status != run.StageStatusRunning {
		t.Fatalf("stage after retry: %+v", got)
	}
	ev := h.s.StreamEvent()
	if len(ev.Output.NonTerminalStages) != 1 || ev.Output.NonTerminalStages[0].ExecutionAttempt != 2 || ev.Output.PendingStageCount != 1 {
		t.Fatalf("stream event %+v", ev.Output)
	}
}

// A start recorded with its stage's end is written as the end alone, which carries its
// attempt: the written events fold to the state the step decided on. A start alone (a call
// still running) is written as it is.
func TestAStartWrittenWithItsEndIsFoldedIntoIt(t *testing.T) {
	for _, failed := range []bool{false, true} {
		h := start(t, def(t, linear), `{}`)
		st := h.step()[0]
		end := done(st, `{}`)
		if failed {
			end = run.Fact{ExecutionID: st.ExecutionID, Kind: run.FactFailed, Attempt: 3, Error: json.RawMessage(`{"code":"x"}`), At: t0}
		}
		facts := []run.Fact{{ExecutionID: st.ExecutionID, Kind: run.FactStarted, Attempt: 2, At: t0},
			{ExecutionID: st.ExecutionID, Kind: run.FactStarted, Attempt: 3, At: t0}, end}
		events, _ := run.Step(h.s, facts, cond, t0.Add(time.Second))
		var attempt int
		for _, e := range events {
			switch e := e.(type) {
			case run.StageStarted:
				t.Fatalf("failed %v: a start written with its end: %+v", failed, e)
			case run.StageCompleted:
				attempt = e.Attempt
			case run.StageFailed:
				attempt = e.Attempt
			}
		}
		if attempt != 3 {
			t.Fatalf("failed %v: the end carries attempt %d, want the last start's 3", failed, attempt)
		}
		h.apply(events)
		if got, _ := h.s.Stage(st.ID); got.Attempt != 3 || !got.Status.Terminal() {
			t.Fatalf("failed %v: stage folded from the events written: %+v", failed, got)
		}
	}
	h := start(t, def(t, linear), `{}`)
	st := h.step()[0]
	events, _ := run.Step(h.s, []run.Fact{{ExecutionID: st.ExecutionID, Kind: run.FactStarted, Attempt: 1, At: t0}}, cond, t0)
	if len(events) != 1 {
		t.Fatalf("a start alone wrote %v, want its StageStarted", events)
	}
	if _, ok := events[0].(run.StageStarted); !ok {
		t.Fatalf("a start alone wrote %T, want run.StageStarted", events[0])
	}
}

// The dispatch a stage's end leads to is written inside the end (StageCompleted.Then), and
// the written events fold to the state the same events fold to written one by one.
func TestADispatchIsWrittenInTheEndBeforeIt(t *testing.T) {
	h := start(t, def(t, linear), `{"x": 1}`)
	a := h.step()[0]
	events, dispatched := run.Step(h.s, []run.Fact{done(a, `{"x":1}`)}, cond, t0.Add(time.Second))
	if len(events) != 1 || len(dispatched) != 1 {
		t.Fatalf("the end of a with the dispatch of b: %d events %v, %d dispatched", len(events), events, len(dispatched))
	}
	end, ok := events[0].(run.StageCompleted)
	if !ok || end.Then == nil || len(end.Then.Stages) != 1 || end.Then.Stages[0].StageID != dispatched[0].ID {
		t.Fatalf("want a's end carrying b's dispatch: %+v", events[0])
	}
	split := h.s.Clone()
	then := *end.Then
	end.Then = nil
	split.Apply(end)
	split.Apply(then)
	h.apply(events)
	if !reflect.DeepEqual(h.s.Detail(), split.Detail()) || h.s.UpdatedAt != then.At || h.s.Pending != split.Pending {
		t.Fatalf("folded with the dispatch inside the end:\n%+v\nwritten one by one:\n%+v", h.s.Detail(), split.Detail())
	}
	if b, _ := h.s.Stage(dispatched[0].ID); b.Status != run.StageStatusCreated || !b.DispatchedAt.Equal(then.At) {
		t.Fatalf("b after the fold: %+v", b)
	}
}

func TestStepLeavesItsInputStateAlone(t *testing.T) {
	h := start(t, def(t, loop), `{"items": [1, 2, 3]}`)
	before := len(h.s.Stages)
	run.Step(h.s, nil, cond, t0)
	if len(h.s.Stages) != before || h.s.Pending != 0 {
		t.Fatalf("Step changed the state it was given: %d stages, %d pending", len(h.s.Stages), h.s.Pending)
	}
}

// Evolve returns a new state and leaves the one it was given as it was, even though both share
// stages and indexes until one of them changes.
func TestEvolveLeavesItsReceiverAlone(t *testing.T) {
	h := start(t, def(t, loop), `{"items": [1, 2, 3]}`)
	dispatched := h.step()
	if len(dispatched) == 0 {
		t.Fatal("nothing dispatched")
	}
	before := h.s
	stages, pending := len(before.Stages), before.Pending
	st := dispatched[0]
	after := before.Evolve(run.StageStarted{RunID: before.ID, StageID: st.ID, Attempt: 1, At: t0})
	after = after.Evolve(run.StageCompleted{RunID: before.ID, StageID: st.ID, Output: json.RawMessage(`{}`), At: t0})
	if got, _ := after.Stage(st.ID); got.Status != run.StageStatusCompleted {
		t.Fatalf("evolved stage: %+v", got)
	}
	got, _ := before.Stage(st.ID)
	if got.Status != st.Status || len(before.Stages) != stages || before.Pending != pending {
		t.Fatalf("Evolve changed its receiver: stage %s, %d stages, %d pending", got.Status, len(before.Stages), before.Pending)
	}
	if events, _ := run.Step(before, []run.Fact{done(st, `{}`)}, cond, t0); len(events) == 0 {
		t.Fatal("the receiver no longer advances as before")
	}
}

// A run stepped at or after its definition's timeoutMs fails with run_timeout, its open
// stages cancelled; before the deadline it runs as usual.
func TestRunTimeout(t *testing.T) {
	d := def(t, linear)
	d.TimeoutMs = 1000
	h := start(t, d, `{"x": 1}`)
	a := h.step()
	if len(a) != 1 || h.s.Status.Terminal() || !h.s.Deadline().Equal(t0.Add(time.Second)) {
		t.Fatalf("before the deadline: dispatched %d, status %s, deadline %v", len(a), h.s.Status, h.s.Deadline())
	}
	h.at = t0.Add(time.Second - 2*time.Millisecond)
	b := h.step(done(a[0], `{"x": 1}`))
	if len(b) != 1 || h.s.Status.Terminal() {
		t.Fatalf("a millisecond before the deadline: dispatched %d, status %s", len(b), h.s.Status)
	}
	if got := h.step(); len(got) != 0 || h.s.Status != run.StatusFailed {
		t.Fatalf("at the deadline: dispatched %d, status %s", len(got), h.s.Status)
	}
	var e struct{ Code string }
	if err := json.Unmarshal(h.s.Error, &e); err != nil || e.Code != run.CodeRunTimeout {
		t.Fatalf("run error %s, want code %s", h.s.Error, run.CodeRunTimeout)
	}
	st, _ := h.s.Stage(b[0].ID)
	if st.Status != run.StageStatusFailed || !json.Valid(st.Error) || h.s.Pending != 0 {
		t.Fatalf("the open stage after the timeout: %+v, pending %d", st, h.s.Pending)
	}
	if late := h.step(done(b[0], `{}`)); len(late) != 0 || h.s.Status != run.StatusFailed {
		t.Fatal("a late result must change nothing")
	}
	if d := def(t, linear); (&run.State{Definition: d}).Deadline() != (time.Time{}) {
		t.Fatal("a run without timeoutMs has no deadline")
	}
}

// A stage is alone in flight when every other stage of its run has ended: the one stage of a
// linear run, not an item of a loop (whose FOR_EACH stage stays in flight with its items).
func TestAStageIsAloneOnlyWithNoOtherInFlight(t *testing.T) {
	h := start(t, def(t, linear), `{"x": 7}`)
	d := h.step()
	if len(d) != 1 || !h.s.Alone(d[0].ID) {
		t.Fatalf("the one stage of a linear run is not alone (%d dispatched)", len(d))
	}
	l := start(t, def(t, loop), `{"items": [1, 2, 3]}`)
	items := l.step()
	if len(items) != 3 || l.s.Alone(items[0].ID) {
		t.Fatalf("an item of a loop running 3 at once is alone (%d dispatched)", len(items))
	}
	l.step(done(items[1], `{}`), done(items[2], `{}`))
	if l.s.Alone(items[0].ID) {
		t.Fatal("the last item of a loop is alone while its FOR_EACH stage is in flight")
	}
}
