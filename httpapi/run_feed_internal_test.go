package httpapi

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/testenv"
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

// TestRunFeedStartsFromTheCacheOnlyWhenNothingLaterWasDelivered: a stream of a run triggered
// here (announced to the hub) starts from the commands' cache without reading the run, unless
// the hub delivered a record the cached state lacks (another instance wrote it), the client
// resumes from a Last-Event-ID, or the run was not announced.
func TestRunFeedStartsFromTheCacheOnlyWhenNothingLaterWasDelivered(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{run.Category}}, nil)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var def workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "cached", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "a", "module": "core.echo"}], "edges": [{"from": "t", "to": "a"}]}`), &def); err != nil {
		t.Fatal(err)
	}
	wf, err := env.Cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: def})
	if err != nil {
		t.Fatal(err)
	}
	announced := commands.WithRunAnnouncer(env.Cmds, func(id string) { hub.Expect(commands.RunStream(id)) })
	trigger := func(cmds *commands.Commands) string {
		runs, err := cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID, Input: json.RawMessage(`{}`)})
		if err != nil || len(runs) != 1 {
			t.Fatalf("trigger: %v %v", runs, err)
		}
		return runs[0].RunID
	}
	start := func(id string, current bool) (*runFeed, []sseMessage, bool) {
		w := hub.WatchRecords(commands.RunStream(id))
		t.Cleanup(w.Close)
		f := &runFeed{cmds: announced, stream: commands.RunStream(id), watch: w}
		out, ok := f.fromCache(hub, id, current)
		return f, out, ok
	}

	id := trigger(announced) // no scheduler runs: the run stays EXECUTING, written here alone
	f, out, ok := start(id, true)
	if !ok || len(out) != 1 || f.state.Status != run.StatusExecuting || f.state.WorkspaceID != ws || out[0].revision != f.next-1 {
		t.Fatalf("from the cache: %v, %d messages, %s", ok, len(out), f.state.Status)
	}
	if _, _, ok := start(id, false); ok {
		t.Fatal("a resuming client was served the cache, which has no earlier changes")
	}
	if _, _, ok := start(trigger(env.Cmds), true); ok {
		t.Fatal("a run not announced to the hub was served from the cache")
	}

	// Another instance ends the run: once the hub has delivered its end, the cached state is
	// behind what a new watch would be handed, and the run is read.
	if _, err := commands.New(env.Store).Workflows.CancelRun(ctx, id, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the hub to deliver the cancellation", func() bool {
		next, _ := hub.Delivered(commands.RunStream(id))
		return next > f.next
	})
	if _, _, ok := start(id, true); ok {
		t.Fatal("a stream started from a cached state the hub has delivered records past")
	}
	// The feed started before the cancellation folds it from its watch.
	testenv.Eventually(t, 10*time.Second, "the first feed to fold the cancellation", func() bool {
		if _, err := f.advance(ctx); err != nil {
			t.Fatal(err)
		}
		return f.terminal()
	})
}
