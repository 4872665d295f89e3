package httpapi

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/livehub"
)

// TestRunFeedSendsTheEndItIsHanded: a run's stream sends the end the scheduler hands the hub
// (livehub.NotifyEnded) without reading the run back (the feed has no commands to read with),
// and only when that skips no status.
func TestRunFeedSendsTheEndItIsHanded(t *testing.T) {
	const stream = "run-r1"
	executing := run.State{Exists: true, ID: "r1", Status: run.StatusExecuting}
	completed := run.State{Exists: true, ID: "r1", Status: run.StatusCompleted}
	cases := []struct {
		name string
		from run.State
		end  livehub.Ended
		sent bool
	}{
		{"executing, then its end", executing, livehub.Ended{Revision: 7, State: completed}, true},
		{"created: EXECUTING would be skipped", run.State{Exists: true, ID: "r1", Status: run.StatusCreated}, livehub.Ended{Revision: 7, State: completed}, false},
		{"an end behind the feed", executing, livehub.Ended{Revision: 3, State: completed}, false},
		{"another run's end", executing, livehub.Ended{Revision: 7, State: run.State{Exists: true, ID: "r2", Status: run.StatusCompleted}}, false},
		{"a state that has not ended", executing, livehub.Ended{Revision: 7, State: executing}, false},
		{"a state of another type", executing, livehub.Ended{Revision: 7, State: "COMPLETED"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hub := livehub.New(eventstore.Store(nil), eventstore.Filter{}, nil)
			w := hub.WatchRecords(stream)
			defer w.Close()
			f := &runFeed{stream: stream, state: c.from, next: 5, watch: w}
			hub.NotifyEnded(stream, c.end)
			out, err := f.advance(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !c.sent {
				if len(out) != 0 || f.state.Status != c.from.Status || f.next != 5 {
					t.Fatalf("an end it cannot use moved the feed: %d messages, %s at %d", len(out), f.state.Status, f.next)
				}
				return
			}
			if len(out) != 1 || out[0].revision != 7 || !f.terminal() || f.next != 8 {
				t.Fatalf("got %d messages, terminal %v, next %d; want the end at revision 7", len(out), f.terminal(), f.next)
			}
			var ev run.StreamEvent
			if err := json.Unmarshal(out[0].data, &ev); err != nil || ev.Status != run.StatusCompleted || ev.ID != "r1" {
				t.Fatalf("sent %s (%v)", out[0].data, err)
			}
		})
	}
}
