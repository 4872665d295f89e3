package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/schedule"
)

// scheduleClockRate is how much faster than the wall the schedule test's serves run: an
// every-second schedule fires 20 times a wall second.
const scheduleClockRate = 20

// TestScheduleFiresOncePerFireTimeWithTwoServes: two serve processes on one database, on one
// test clock 20 times faster than the wall (the same start and rate, so that they agree on
// every fire time), and an every-second schedule (overlap allow: every fire starts a run).
// After 30 fires the serve leading the schedules is killed with SIGKILL, the other takes the
// lead and fires on, the killed one is started again, and the schedule is paused after 70
// fires. Every fire time from the first to the last was decided once, started its own run (the
// id derived from the fire time), and no run was started twice; the runs all complete, every
// execution is charged once, and the read model rebuilds to what the service left.
func TestScheduleFiresOncePerFireTimeWithTwoServes(t *testing.T) {
	clock := []string{"SWITCHYARD_TEST_CLOCK_START=" + time.Now().UTC().Format(time.RFC3339Nano),
		fmt.Sprintf("SWITCHYARD_TEST_CLOCK_RATE=%d", scheduleClockRate)}
	// Info: the reactor logs "schedules running" when its instance takes the lead.
	svc := startSDKService(t, 1000, append(clock, "SWITCHYARD_LOG_LEVEL=info")...)
	second, s2 := svc.startSecond(t)
	clis, serves := []*cli{svc.cli, second}, []*serveProcess{svc.srv, s2}
	c := svc.caller(t, svc.key)
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "tick", "components": [
		{"id": "tick", "module": "ON_SCHEDULE", "config": {"every": "1s", "overlap": "allow", "catchUp": "1h", "input": {"tick": true}}, "position": [0, 0]},
		{"id": "a", "module": "core.echo", "position": [200, 0]}],
	  "edges": [{"from": "tick", "to": "a"}]}`)
	id := wf["id"].(string)
	fires := func() []schedule.Fired { return readFires(t, svc.cli, commands.ScheduleStream(id, "tick")) }
	// waitFires waits for n fires while the serves named live run.
	waitFires := func(n int, live ...int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for got := fires(); len(got) < n; got = fires() {
			for _, i := range live {
				select {
				case <-serves[i].done:
					t.Fatalf("serve %d exited (%v) at fire %d of %d\nits output:\n%s", i+1, serves[i].err, len(got), n, serves[i].out)
				default:
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d fires within 60s, want %d\nfirst serve:\n%s\nsecond serve:\n%s", len(got), n, serves[0].out, serves[1].out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	leading := func(s *serveProcess) int { return strings.Count(s.out.String(), "schedules running") }

	waitFires(30, 0, 1)
	lead, other := 0, 1
	if leading(serves[1]) > 0 {
		lead, other = 1, 0
	}
	if leading(serves[lead]) == 0 || leading(serves[other]) != 0 {
		t.Fatalf("the premise failed: not exactly one serve leads the schedules (%d, %d)", leading(serves[0]), leading(serves[1]))
	}
	if err := serves[lead].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-serves[lead].done
	killedAt := len(fires())
	waitFires(killedAt+10, other)
	if leading(serves[other]) == 0 {
		t.Fatalf("the premise failed: the surviving serve fired without taking the lead")
	}
	// The killed one comes back on its port, with the same clock.
	serves[lead] = clis[lead].serveReady()
	waitFires(70, 0, 1)
	mustStatus(t, c.post("/v1/sdk/workflows/"+id+"/schedules/tick/pause", ""), http.StatusOK, "pause")

	got := fires()
	for i, f := range got {
		if want := commands.ScheduleRunID(id, "tick", f.FireTime); f.Outcome != schedule.OutcomeStarted || f.RunID != want {
			t.Fatalf("fire %d at %s: outcome %q, run %s; want started, run %s", i, f.FireTime, f.Outcome, f.RunID, want)
		}
		if i > 0 && !f.FireTime.Equal(got[i-1].FireTime.Add(time.Second)) {
			t.Fatalf("fire %d at %s follows the fire at %s: every second between the first fire and the last fires once, in order",
				i, f.FireTime, got[i-1].FireTime)
		}
	}
	if len(got) < 70 {
		t.Fatalf("%d fires after the pause, want at least 70", len(got))
	}
	t.Logf("%d fires, %s to %s; serve %d led and was killed after %d", len(got), got[0].FireTime, got[len(got)-1].FireTime, lead+1, killedAt)
	// A fire is decided before its run starts: the last fire's run may start just after the
	// pause.
	triggered := runsTriggered(t, svc.cli, id)
	for deadline := time.Now().Add(30 * time.Second); len(triggered) < len(got); triggered = runsTriggered(t, svc.cli, id) {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(triggered) != len(got) {
		t.Fatalf("%d runs of the workflow for %d fires", len(triggered), len(got))
	}
	for _, f := range got {
		if n := triggered[f.RunID]; n != 1 {
			t.Fatalf("the run of the fire at %s was started %d times", f.FireTime, n)
		}
		if m := pollRun(t, c, f.RunID, 60*time.Second, terminal); m["status"] != "COMPLETED" {
			t.Fatalf("the run of the fire at %s: %v", f.FireTime, m)
		}
	}
	if charged := readExecutionLog(t, svc.cli).once(t); charged != len(got) {
		t.Fatalf("%d executions charged for %d runs of one echo stage each", charged, len(got))
	}
	// The killed-and-restarted serve ends last, audited: the survivor first.
	serves[other].stop(t, 30*time.Second)
	stopAndAudit(t, clis[lead], serves[lead], svc.key.WorkspaceID)
}

// readFires reads the ScheduleFired events of a schedule's stream, in its order.
func readFires(t *testing.T, c *cli, stream string) []schedule.Fired {
	t.Helper()
	conn := c.connect(t)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(),
		`SELECT data FROM events WHERE stream = $1 AND type = $2 ORDER BY revision`, stream, schedule.Fired{}.EventType())
	if err != nil {
		t.Fatal(err)
	}
	var out []schedule.Fired
	var data []byte
	if _, err := pgx.ForEachRow(rows, []any{&data}, func() error {
		var f schedule.Fired
		if err := json.Unmarshal(data, &f); err != nil {
			return err
		}
		out = append(out, f)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// runsTriggered counts the RunTriggered events of each run of a workflow.
func runsTriggered(t *testing.T, c *cli, workflowID string) map[string]int {
	t.Helper()
	conn := c.connect(t)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(),
		`SELECT data->>'runId', count(*) FROM events WHERE type = 'RunTriggered' AND data->>'workflowId' = $1 GROUP BY 1`, workflowID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var run string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&run, &n}, func() error { out[run] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
