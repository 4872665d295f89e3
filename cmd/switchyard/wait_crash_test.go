package main

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestSIGKILLWithAWaitDueDuringTheOutage: a run waits (WAIT for 10m); serve is killed with
// SIGKILL while it waits and comes back past the wait's time (an hour later by its clock, a
// test clock's offset, so that the test does not wait for it); the next serve finds the wait in
// the log (its read model of open waits) and fires it once: the stage completes after the
// restart, the run goes on to its end, the log holds one start and one end of the wait, and
// the read model rebuilds to what the service left.
func TestSIGKILLWithAWaitDueDuringTheOutage(t *testing.T) {
	svc := startSDKService(t, 100)
	c := svc.caller(t, svc.key)
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "hold", "components": [
		{"id": "t", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "w", "module": "WAIT", "config": {"for": "10m"}, "position": [200, 0]},
		{"id": "a", "module": "core.echo", "position": [400, 0]}],
	  "edges": [{"from": "t", "to": "w"}, {"from": "w", "to": "a"}]}`)
	id := c.trigger(t, wf["id"].(string), `{"n": 1}`)
	m := pollRun(t, c, id, 30*time.Second, func(m map[string]any) bool {
		for _, s := range stages(m) {
			if s["referenceId"] == "w" && s["waitingFor"] != nil {
				return true
			}
		}
		return false
	})
	w := stageOf(t, m, "w")
	until, err := time.Parse(time.RFC3339Nano, w["waitingFor"].(map[string]any)["until"].(string))
	if err != nil || w["status"] != "RUNNING" {
		t.Fatalf("waiting stage %v: %v", w, err)
	}
	if err := svc.srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-svc.srv.done
	killed := time.Now()
	if !killed.Before(until) {
		t.Fatalf("the premise failed: the wait was due (%s) before the kill (%s)", until, killed)
	}
	// The premise is a wait due while no serve runs: the service comes back an hour later, by
	// its clock (a test build's SWITCHYARD_TEST_CLOCK_OFFSET), long past the wait's time.
	svc.cli.env = append(svc.cli.env, "SWITCHYARD_TEST_CLOCK_OFFSET=1h")
	restarted := svc.cli.serveReady()
	m = pollRun(t, c, id, 60*time.Second, func(m map[string]any) bool { return m["status"] == "COMPLETED" || m["status"] == "FAILED" })
	if m["status"] != "COMPLETED" || stageOf(t, m, "w")["status"] != "COMPLETED" {
		t.Fatalf("after the restart: %v", m)
	}
	conn := svc.cli.connect(t)
	var waits, ends int
	var endedAt time.Time
	err = conn.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE type = 'RunStageWaiting'),
		count(*) FILTER (WHERE type = 'RunStageCompleted' AND data->>'stageId' = $2),
		max((data->>'at')::timestamptz) FILTER (WHERE type = 'RunStageCompleted' AND data->>'stageId' = $2)
		FROM events WHERE stream = $1`, "run-"+id, w["id"]).Scan(&waits, &ends, &endedAt)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if waits != 1 || ends != 1 || endedAt.Before(until) || !endedAt.After(killed.Add(time.Hour)) {
		t.Fatalf("the log holds %d starts and %d ends of the wait (ended %s, due %s, killed %s); want one each, "+
			"ended by the restarted service's clock, an hour on", waits, ends, endedAt, until, killed)
	}
	if r := c.do(http.MethodGet, "/v1/sdk/workflows/executions/"+id, nil); r.status != http.StatusOK {
		t.Fatalf("GET run: %d", r.status)
	}
	stopAndAudit(t, svc.cli, restarted, svc.key.WorkspaceID)
}
