package schedule_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/schedule"
	"github.com/switchyard/switchyard/domain/workflow"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func fold(events ...domain.Event) schedule.State {
	var s schedule.State
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

func TestDecideFireByOverlapPolicy(t *testing.T) {
	running := fold(schedule.Fired{FireTime: t0, Outcome: schedule.OutcomeStarted, RunID: "r0"})
	queued := running.Evolve(schedule.Fired{FireTime: t0.Add(time.Minute), Outcome: schedule.OutcomeQueued})
	cases := []struct {
		name, overlap string
		state         schedule.State
		running       bool
		outcome, run  string
		cancelled     string
	}{
		{"skip while running", workflow.OverlapSkip, running, true, schedule.OutcomeSkipped, "", ""},
		{"skip once ended", workflow.OverlapSkip, running, false, schedule.OutcomeStarted, "r1", ""},
		{"allow while running", workflow.OverlapAllow, running, true, schedule.OutcomeStarted, "r1", ""},
		{"cancel previous", workflow.OverlapCancelPrevious, running, true, schedule.OutcomeStarted, "r1", "r0"},
		{"queue one", workflow.OverlapQueueOne, running, true, schedule.OutcomeQueued, "", ""},
		{"queue one, one pending already", workflow.OverlapQueueOne, queued, true, schedule.OutcomeSkipped, "", ""},
	}
	for _, c := range cases {
		events, err := schedule.DecideFire(c.state, schedule.Fire{FireTime: t0.Add(2 * time.Minute), RunID: "r1", Overlap: c.overlap, PreviousRunning: c.running}, t0)
		if err != nil || len(events) != 1 {
			t.Fatalf("%s: %v %v", c.name, events, err)
		}
		f := events[0].(schedule.Fired)
		if f.Outcome != c.outcome || f.RunID != c.run || f.Cancelled != c.cancelled {
			t.Errorf("%s: got %+v", c.name, f)
		}
	}
}

func TestDecideFireOncePerFireTime(t *testing.T) {
	s := fold(schedule.Fired{FireTime: t0, Outcome: schedule.OutcomeStarted, RunID: "r0"})
	for _, at := range []time.Time{t0, t0.Add(-time.Second)} {
		if events, _ := schedule.DecideFire(s, schedule.Fire{FireTime: at, RunID: "x"}, t0); len(events) != 0 {
			t.Fatalf("fire at %v decided again: %v", at, events)
		}
	}
	paused := s.Evolve(schedule.Paused{})
	if events, _ := schedule.DecideFire(paused, schedule.Fire{FireTime: t0.Add(time.Minute), RunID: "x"}, t0); len(events) != 0 {
		t.Fatalf("a paused schedule fired: %v", events)
	}
	resumed := paused.Evolve(schedule.Resumed{At: t0.Add(time.Hour)})
	if events, _ := schedule.DecideFire(resumed, schedule.Fire{FireTime: t0.Add(time.Minute), RunID: "x"}, t0); len(events) != 0 {
		t.Fatalf("a fire due while paused ran after the resume: %v", events)
	}
}

func TestDecideDequeue(t *testing.T) {
	s := fold(schedule.Fired{FireTime: t0, Outcome: schedule.OutcomeStarted, RunID: "r0"},
		schedule.Fired{FireTime: t0.Add(time.Minute), Outcome: schedule.OutcomeQueued})
	if events, _ := schedule.DecideDequeue(s, "w", "c", "r1", true, t0); len(events) != 0 {
		t.Fatalf("dequeued while the previous run runs: %v", events)
	}
	events, _ := schedule.DecideDequeue(s, "w", "c", "r1", false, t0)
	if len(events) != 1 || !events[0].(schedule.Fired).FireTime.Equal(t0.Add(time.Minute)) {
		t.Fatalf("dequeue: %v", events)
	}
	after := s.Evolve(events[0])
	if !after.Queued.IsZero() || after.LastRunID != "r1" {
		t.Fatalf("after dequeue: %+v", after)
	}
}
