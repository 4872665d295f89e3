package debounce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/debounce"
	"github.com/switchyard/switchyard/testenv"
)

// clock is an injected clock: it moves when the test says, and fires the waits it passes.
type clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters map[chan time.Time]time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
	} else {
		c.waiters[ch] = c.now.Add(d)
	}
	return ch
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for ch, at := range c.waiters {
		if !at.After(c.now) {
			ch <- c.now
			delete(c.waiters, ch)
		}
	}
}

// Windows gathered while no reactor ran are flushed by reactors started afterwards, from the
// read model; two reactors leading at once (no lock) still start each window's run once.
func TestWindowsGatheredBeforeTheReactorFlushOnce(t *testing.T) {
	env := testenv.New(t)
	clk := &clock{now: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), waiters: map[chan time.Time]time.Time{}}
	env.Cmds = commands.New(env.Store, commands.WithClock(clk.Now))
	ctx := context.Background()
	ws := env.Workspace(t, 1000)
	wf, err := env.Cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: workflow.Definition{Name: "d",
		Components: []workflow.Component{{ID: "on", Module: workflow.ModuleOnEvent,
			Config: json.RawMessage(`{"name": "tick", "debounce": {"key": "k", "quietMs": 1000}}`)}, {ID: "echo", Module: "core.echo"}},
		Edges: []workflow.Edge{{From: "on", To: "echo"}}}})
	if err != nil {
		t.Fatal(err)
	}
	env.CaughtUp(t, "eventtriggers")
	runs := map[string]bool{}
	for i := range 6 {
		out, err := env.Cmds.Events.SendEvent(ctx, commands.SendEvent{WorkspaceID: ws, Name: "tick", Triggers: env.Queries,
			Payload: json.RawMessage(fmt.Sprintf(`{"k": %d, "i": %d}`, i%2, i))})
		if err != nil || len(out.Runs) != 1 || out.Runs[0].WorkflowID != wf.ID {
			t.Fatalf("send %d: %+v %v", i, out, err)
		}
		runs[out.Runs[0].RunID] = true
	}
	if len(runs) != 2 {
		t.Fatalf("two keys gave %d runs", len(runs))
	}
	env.CaughtUp(t, "debouncewindows")
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	for range 2 {
		testenv.Go(t, debounce.New(env.Store, env.Cmds, env.Queries, debounce.Config{Now: clk.Now, After: clk.After, Logger: log}).Run)
	}
	clk.Advance(999 * time.Millisecond)
	clk.Advance(time.Millisecond)
	perStream := map[string]int{}
	testenv.Eventually(t, 20*time.Second, "both windows' runs to start and be recorded", func() bool {
		events, err := env.Store.ReadAll(ctx, eventstore.Position{}, 100000, eventstore.Filter{Types: []string{"RunTriggered", "DebounceFlushed", "DebounceStarted"}})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second) // a flush that failed (the shared database) is tried again a second later
		clear(perStream)
		for _, e := range events {
			perStream[e.Stream+" "+e.Type]++
		}
		return len(perStream) == 6
	})
	for id := range runs {
		if perStream["run-"+id+" RunTriggered"] != 1 {
			t.Fatalf("run %s not started: %v", id, perStream)
		}
	}
	for k, n := range perStream {
		if n != 1 {
			t.Fatalf("%s: %d times", k, n)
		}
	}
}
