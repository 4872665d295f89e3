package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A serve process killed with SIGKILL while runs of one key wait their turn (limit 1): the
// restarted service resumes the line exactly. Read in log order, no two runs of the key are
// ever admitted at once, each run is admitted once and in trigger order, every run completes,
// each stage runs and is charged once; another key's runs went alongside.
func TestSIGKILLWithRunsWaitingForAKey(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	ws := svc.key.WorkspaceID
	wf := svc.createWorkflow(t, ws, `{"name": "one at a time per customer", "concurrency": {"key": "customer", "limit": 1},
	  "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "work", "module": "core.delay", "config": {"ms": 300}}],
	  "edges": [{"from": "t", "to": "work"}]}`)["id"].(string)
	var ofA, all []string
	for i := 1; i <= 5; i++ {
		id := c.trigger(t, wf, fmt.Sprintf(`{"customer": "a", "n": %d}`, i))
		ofA, all = append(ofA, id), append(all, id)
		if i <= 2 {
			all = append(all, c.trigger(t, wf, fmt.Sprintf(`{"customer": "b", "n": %d}`, i)))
		}
	}
	pollRun(t, c, ofA[1], 30*time.Second, func(m map[string]any) bool { return m["status"] == "EXECUTING" || terminal(m) })
	restarted := svc.killAndRestart(t)

	for _, id := range all {
		if m := pollRun(t, c, id, 60*time.Second, terminal); m["status"] != "COMPLETED" {
			t.Fatalf("run %s after the crash: %v", id, m)
		}
	}
	conn := svc.cli.connect(t)
	rows, err := conn.Query(context.Background(), `SELECT type, data->>'runId', coalesce(data->>'queueId', '') FROM events
		WHERE type IN ('RunAdmitted', 'RunFinished') ORDER BY tx_id, position`)
	if err != nil {
		t.Fatal(err)
	}
	running := map[string][]string{} // by queue
	admitted := map[string]int{}
	var order []string
	for rows.Next() {
		var typ, runID, queue string
		if err := rows.Scan(&typ, &runID, &queue); err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "RunAdmitted":
			admitted[runID]++
			running[queue] = append(running[queue], runID)
			if len(running[queue]) > 1 {
				t.Fatalf("runs %v of one key admitted at once, limit 1", running[queue])
			}
			if slices.Contains(ofA, runID) {
				order = append(order, runID)
			}
		case "RunFinished":
			running[queue] = slices.DeleteFunc(running[queue], func(id string) bool { return id == runID })
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	for _, id := range all {
		if admitted[id] != 1 {
			t.Fatalf("run %s admitted %d times", id, admitted[id])
		}
	}
	if !slices.Equal(order, ofA) {
		t.Fatalf("a's runs admitted in the order %v, want their trigger order %v", order, ofA)
	}
	stopAndAudit(t, svc.cli, restarted, ws)
	if ledger := readExecutionLog(t, svc.cli); len(ledger) != len(all) || ledger.once(t) != len(all) {
		t.Fatalf("the log has %d executions, want the %d runs' stages, each charged once: %v", len(ledger), len(all), ledger)
	}
}
