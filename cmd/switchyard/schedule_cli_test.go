package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/commands"
)

// writeDef writes a workflow definition to a file of the test's and returns its path.
func writeDef(t *testing.T, def string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "def.json")
	if err := os.WriteFile(path, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The operator's commands of schedules, signals and events, with no serve running: each reaches
// the command the SDK endpoint calls, prints what it did (--json as the endpoint answers), and a
// bad flag is an error naming it.
func TestScheduleSignalEventCLI(t *testing.T) {
	c := newCLI(t)
	c.ok("admin", "bootstrap", "--email", "ops@example.com", "--password", "password-123", "--workspace", "ops", "--credits", "100")
	var sched, listener struct{ ID string }
	c.okJSON(&sched, "admin", "workflow", "create", "--workspace", "ops", "--json", "--file", writeDef(t, `{"name": "hourly", "components": [
		{"id": "tick", "module": "ON_SCHEDULE", "config": {"every": "1h", "input": {"n": 1}}},
		{"id": "paid", "module": "WAIT", "config": {"signal": {"name": "payment.cleared"}}}], "edges": [{"from": "tick", "to": "paid"}]}`))
	c.okJSON(&listener, "admin", "workflow", "create", "--workspace", "ops", "--json", "--file", writeDef(t, `{"name": "on-paid", "components": [
		{"id": "on", "module": "ON_EVENT", "config": {"name": "order.paid"}},
		{"id": "echo", "module": "core.echo"}], "edges": [{"from": "on", "to": "echo"}]}`))

	t.Run("schedules", func(t *testing.T) {
		var listed struct {
			WorkflowID string                  `json:"workflowId"`
			Schedules  []commands.ScheduleView `json:"schedules"`
		}
		c.okJSON(&listed, "admin", "workflow", "schedules", sched.ID, "--workspace", "ops", "--json")
		if listed.WorkflowID != sched.ID || len(listed.Schedules) != 1 || listed.Schedules[0].ComponentID != "tick" ||
			listed.Schedules[0].Paused || len(listed.Schedules[0].NextFires) != 10 {
			t.Fatalf("workflow schedules printed %+v", listed)
		}
		var v commands.ScheduleView
		c.okJSON(&v, "admin", "workflow", "schedule", "pause", sched.ID, "tick", "--workspace", "ops", "--json")
		if !v.Paused {
			t.Fatalf("schedule pause printed %+v", v)
		}
		human := c.ok("admin", "workflow", "schedules", sched.ID, "--workspace", "ops").stdout
		next := listed.Schedules[0].NextFires[0].Format("2006-01-02T15:04:05Z07:00")
		if !strings.Contains(human, "schedule tick") || !strings.Contains(human, "paused") || !strings.Contains(human, "every 1h") ||
			!strings.Contains(human, next) {
			t.Fatalf("workflow schedules printed %q, want tick paused, every 1h, next %s", human, next)
		}
		if res := c.ok("admin", "workflow", "schedule", "resume", sched.ID, "tick", "--workspace", "ops"); !strings.Contains(res.stdout, "active") {
			t.Fatalf("schedule resume printed %s", res)
		}
		if res := c.run("admin", "workflow", "schedule", "pause", sched.ID, "paid", "--workspace", "ops"); res.code == 0 || !strings.Contains(res.stderr, "not found") {
			t.Fatalf("pausing a component that is no schedule: %s", res)
		}
	})

	t.Run("trigger and signal", func(t *testing.T) {
		var started commands.TriggeredRun
		c.okJSON(&started, "admin", "workflow", "schedule", "trigger", sched.ID, "tick", "--workspace", "ops", "--json")
		if started.RunID == "" {
			t.Fatalf("schedule trigger printed %+v", started)
		}
		// A WAIT stage holds no executor: the run's trigger already has it waiting, serve or not.
		var res commands.SignalResult
		signal := []string{"admin", "workflow", "signal", started.RunID, "--workspace", "ops", "--name", "payment.cleared", "--payload", `{"amount": 3}`, "--id", "pay-1", "--json"}
		c.okJSON(&res, signal...)
		if res.RunID != started.RunID || res.ID != "pay-1" || res.Duplicate || len(res.Completed) != 1 {
			t.Fatalf("workflow signal printed %+v", res)
		}
		if out := c.ok(signal[:len(signal)-1]...).stdout; !strings.Contains(out, "duplicate") {
			t.Fatalf("the signal again printed %q", out)
		}
		for flag, args := range map[string][]string{
			"--payload": {"--name", "payment.cleared", "--payload", "{not json"},
			"--id":      {"--name", "payment.cleared", "--id", ""},
			"--name":    {"--name", strings.Repeat("n", 201)},
			`"name"`:    {"--payload", "{}"},
		} {
			res := c.run(append([]string{"admin", "workflow", "signal", started.RunID, "--workspace", "ops"}, args...)...)
			if res.code == 0 || !strings.Contains(res.stderr, flag) {
				t.Fatalf("workflow signal %v: %s, want an error naming %s", args, res, flag)
			}
		}
		c.ok("admin", "workspace", "create", "--name", "elsewhere", "--owner", "ops@example.com")
		if res := c.run("admin", "workflow", "signal", started.RunID, "--workspace", "elsewhere", "--name", "payment.cleared"); res.code == 0 ||
			!strings.Contains(res.stderr, "not found") {
			t.Fatalf("another workspace's run: %s", res)
		}
	})

	t.Run("event send", func(t *testing.T) {
		// The listeners are found in the eventtriggers read model, which no serve keeps current
		// here: the command says so when it finds none.
		if res := c.ok("admin", "event", "send", "--workspace", "ops", "--name", "order.paid"); !strings.Contains(res.stdout, ": 0 runs") ||
			!strings.Contains(res.stderr, "projections rebuild eventtriggers") {
			t.Fatalf("an event sent before the read model caught up: %s", res)
		}
		c.ok("projections", "rebuild", "eventtriggers")
		var sent commands.SentEvent
		send := []string{"admin", "event", "send", "--workspace", "ops", "--name", "order.paid", "--payload", `{"amount": 3}`, "--id", "o-1", "--json"}
		c.okJSON(&sent, send...)
		if sent.EventID == "" || sent.Duplicate || len(sent.Runs) != 1 || sent.Runs[0].WorkflowID != listener.ID || sent.Runs[0].RunID == "" {
			t.Fatalf("event send printed %+v", sent)
		}
		if out := c.ok(send[:len(send)-1]...).stdout; !strings.Contains(out, "duplicate") || !strings.Contains(out, sent.Runs[0].RunID) {
			t.Fatalf("the event again printed %q", out)
		}
		for flag, args := range map[string][]string{
			"--name":    {"--name", "no spaces allowed"},
			"--payload": {"--name", "order.paid", "--payload", "[1"},
		} {
			res := c.run(append([]string{"admin", "event", "send", "--workspace", "ops"}, args...)...)
			if res.code == 0 || !strings.Contains(res.stderr, flag) {
				t.Fatalf("event send %v: %s, want an error naming %s", args, res, flag)
			}
		}
	})
}
