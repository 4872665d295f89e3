package run_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/run"
)

func TestDecideTriggerKey(t *testing.T) {
	now := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
	runs := []run.KeyedRun{{RunID: "r1", JobID: "j1", TriggerID: "t"}}
	_, events, err := run.DecideTriggerKey(run.TriggerKey{}, "ws", "wf", "h1", runs, now)
	if err != nil || len(events) != 1 {
		t.Fatalf("a free key: %v %v", events, err)
	}
	bound := run.TriggerKey{}.Evolve(events[0])
	fresh := []run.KeyedRun{{RunID: "r2", JobID: "j2", TriggerID: "t"}}
	for _, tc := range []struct {
		name         string
		workflow     string
		hash         string
		at           time.Time
		want         string
		wantEvents   int
		wantConflict bool
	}{
		{"same request within the window answers the first runs", "wf", "h1", now.Add(23 * time.Hour), "r1", 0, false},
		{"another body is a conflict", "wf", "h2", now.Add(time.Hour), "", 0, true},
		{"another workflow is a conflict", "wf2", "h1", now.Add(time.Hour), "", 0, true},
		{"after 24 hours the key binds again", "wf", "h2", now.Add(run.TriggerKeyWindow), "r2", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, events, err := run.DecideTriggerKey(bound, "ws", tc.workflow, tc.hash, fresh, tc.at)
			if tc.wantConflict {
				if !errors.Is(err, run.ErrTriggerKeyReused) {
					t.Fatalf("err %v, want ErrTriggerKeyReused", err)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0].RunID != tc.want || len(events) != tc.wantEvents {
				t.Fatalf("got %v, %d events, %v", got, len(events), err)
			}
		})
	}
}
