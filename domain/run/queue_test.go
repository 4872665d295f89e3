package run_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
)

const keyed = `{"name": "keyed", "concurrency": {"key": "customer", "limit": 2}, "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "a", "module": "core.echo"}],
  "edges": [{"from": "t", "to": "a"}]}`

// queueOf folds the joins of runs, in order, and the events given after them.
func queueOf(t *testing.T, runs []string, then ...domain.Event) run.Queue {
	t.Helper()
	var q run.Queue
	for _, id := range runs {
		tr := run.Triggered{RunID: id, WorkflowID: "wf", Definition: def(t, keyed), ConcurrencyKey: "acme", At: t0}
		j, ok := run.JoinQueue(tr)
		if !ok || j.QueueID != run.QueueID("wf", "acme") || j.Limit != 2 {
			t.Fatalf("join: %+v %v", j, ok)
		}
		q = q.Evolve(j)
	}
	for _, e := range then {
		q = q.Evolve(e)
	}
	return q
}

func TestQueueAdmitsInOrderUpToTheLimit(t *testing.T) {
	q := queueOf(t, []string{"r1", "r2", "r3", "r4"})
	events, admitted := run.DecideQueue(q, nil, t0)
	if !slices.Equal(admitted, []string{"r1", "r2"}) || len(events) != 1 {
		t.Fatalf("admitted %v (%v), want r1, r2", admitted, events)
	}
	q = q.Evolve(events[0])
	if !slices.Equal(q.Running, []string{"r1", "r2"}) || !slices.Equal(q.Waiting, []string{"r3", "r4"}) {
		t.Fatalf("queue after admission: %+v", q)
	}
	if events, admitted := run.DecideQueue(q, nil, t0); events != nil || admitted != nil {
		t.Fatalf("a full queue admitted %v (%v)", admitted, events)
	}
	// r2 ends: r3 (not r4) takes its slot, in the same decision.
	events, admitted = run.DecideQueue(q, []string{"r2"}, t0)
	if !slices.Equal(admitted, []string{"r3"}) || len(events) != 2 {
		t.Fatalf("after r2 ended: admitted %v (%v), want r3", admitted, events)
	}
	for _, e := range events {
		q = q.Evolve(e)
	}
	if !slices.Equal(q.Running, []string{"r1", "r3"}) || !slices.Equal(q.Waiting, []string{"r4"}) {
		t.Fatalf("queue: %+v", q)
	}
}

func TestQueueDropsAWaitingRunThatEnded(t *testing.T) {
	q := queueOf(t, []string{"r1", "r2", "r3", "r4"}, run.QueueAdmitted{QueueID: "q", RunIDs: []string{"r1", "r2"}})
	events, admitted := run.DecideQueue(q, []string{"r3"}, t0) // r3 was cancelled while waiting
	if admitted != nil || len(events) != 1 {
		t.Fatalf("admitted %v (%v), want none", admitted, events)
	}
	q = q.Evolve(events[0])
	if !slices.Equal(q.Waiting, []string{"r4"}) || len(q.Running) != 2 {
		t.Fatalf("queue: %+v", q)
	}
	// An end settled twice, or of a run the queue does not hold, changes nothing.
	if events, _ := run.DecideQueue(q, []string{"r3", "elsewhere"}, t0); events != nil {
		t.Fatalf("a second settle of r3: %v", events)
	}
}

func TestQueueIgnoresASecondJoin(t *testing.T) {
	q := queueOf(t, []string{"r1", "r2", "r1"})
	if !slices.Equal(q.Waiting, []string{"r1", "r2"}) {
		t.Fatalf("waiting: %v", q.Waiting)
	}
}

func TestAWaitingRunStartsOnlyOnceAdmitted(t *testing.T) {
	d := def(t, keyed)
	events, err := run.DecideTrigger(run.State{}, "run-1", "ws", "wf", "", "t", d, json.RawMessage(`{"customer": "acme"}`), "acme", cond, t0)
	if err != nil {
		t.Fatal(err)
	}
	if events[0].(run.Triggered).ConcurrencyKey != "acme" {
		t.Fatalf("trigger: %+v", events[0])
	}
	h := &harness{t: t, at: t0}
	h.apply(events)
	if !h.s.Waiting() || h.s.QueueID != run.QueueID("wf", "acme") {
		t.Fatalf("a keyed run should wait: %+v", h.s)
	}
	if d := h.step(); len(d) != 0 || h.s.Status != run.StatusCreated {
		t.Fatalf("a waiting run dispatched %v (%s)", d, h.s.Status)
	}
	if v := h.s.Detail(); v.WaitingFor == nil || v.WaitingFor.ConcurrencyKey != "acme" || v.WaitingFor.Limit != 2 {
		t.Fatalf("detail of a waiting run: %+v", v.WaitingFor)
	}
	h.apply(run.DecideAdmit(h.s, t0))
	if h.s.Waiting() || run.DecideAdmit(h.s, t0) != nil {
		t.Fatal("admitted twice")
	}
	if d := h.step(); len(d) != 1 || h.s.Status != run.StatusExecuting {
		t.Fatalf("an admitted run dispatched %v (%s)", d, h.s.Status)
	}
	if v := h.s.Detail(); v.WaitingFor != nil || v.ConcurrencyKey == nil || *v.ConcurrencyKey != "acme" {
		t.Fatalf("detail of a started run: %+v %v", v.WaitingFor, v.ConcurrencyKey)
	}
	// Its end names its queue, whose slot it frees.
	h.at = h.at.Add(time.Millisecond)
	events, _ = run.Step(h.s, []run.Fact{{ExecutionID: run.ExecutionID(run.StageID("run-1", "a", run.NoIteration)), Kind: run.FactCompleted, Attempt: 1, Output: json.RawMessage(`{}`), At: h.at}}, cond, h.at)
	last, ok := events[len(events)-1].(run.Finished)
	if !ok || last.QueueID != h.s.QueueID {
		t.Fatalf("end: %+v", events)
	}
}

func TestCancellingAWaitingRunNamesItsQueue(t *testing.T) {
	d := def(t, keyed)
	events, _ := run.DecideTrigger(run.State{}, "run-1", "ws", "wf", "", "t", d, json.RawMessage(`{}`), "null", cond, t0)
	var s run.State
	for _, e := range events {
		s = s.Evolve(e)
	}
	out, err := run.DecideCancel(s, "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if f := out[1].(run.Finished); f.QueueID != run.QueueID("wf", "null") {
		t.Fatalf("cancel: %+v", f)
	}
	for _, e := range out {
		s = s.Evolve(e)
	}
	if s.Waiting() || run.DecideAdmit(s, t0) != nil {
		t.Fatal("a cancelled run is admitted")
	}
}

func TestARunWithoutConcurrencyNeverWaits(t *testing.T) {
	h := start(t, def(t, linear), `{}`)
	if h.s.Waiting() || h.s.QueueID != "" {
		t.Fatalf("%+v", h.s)
	}
	if _, ok := run.JoinQueue(run.Triggered{Definition: def(t, linear)}); ok {
		t.Fatal("joined a queue")
	}
}
