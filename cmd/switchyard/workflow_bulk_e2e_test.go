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

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/domain/bulk"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/projections"
)

// holdDef is a workflow whose one stage fails its first attempt and waits an hour for its
// retry: its runs stay EXECUTING, holding no executor slot, until cancelled.
const holdDef = `{"name": "hold", "components": [
	{"id": "t", "module": "ON_API_CALLED"},
	{"id": "wait", "module": "core.fail", "config": {"code": "flaky"}, "retry": {"attempts": 2, "initialIntervalMs": 3600000}}],
  "edges": [{"from": "t", "to": "wait"}]}`

// bulk POSTs a bulk action on workflow wf's runs and returns its id and matched count.
func (c *rawCaller) bulk(t *testing.T, wf, body string) (string, int) {
	t.Helper()
	r := c.post("/v1/sdk/workflows/"+wf+"/runs/bulk", body)
	mustStatus(t, r, http.StatusAccepted, "bulk")
	var out struct {
		BulkID  string
		Matched int
	}
	if err := json.Unmarshal(r.body, &out); err != nil || out.BulkID == "" {
		t.Fatalf("bulk answered %s", r.body)
	}
	return out.BulkID, out.Matched
}

// pollBulk GETs bulk id until it is COMPLETED.
func pollBulk(t *testing.T, c *rawCaller, id string, within time.Duration) bulk.Detail {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := c.do(http.MethodGet, "/v1/sdk/workflows/bulk/"+id, nil)
		mustStatus(t, r, http.StatusOK, "GET bulk")
		var d bulk.Detail
		if err := json.Unmarshal(r.body, &d); err != nil {
			t.Fatalf("bulk detail %s: %v", r.body, err)
		}
		if d.Status == bulk.StatusCompleted {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("bulk %s not completed within %s; last %s", id, within, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRunsReadModel waits until the runs read model has applied every run event in the log,
// so that a bulk's filter sees the runs triggered so far.
func waitRunsReadModel(t *testing.T, c *cli) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var status []projections.Status
		c.okJSON(&status, "projections", "status", "--json")
		for _, s := range status {
			if s.Name == "runs" && s.Lag == 0 && !s.LagCapped {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs read model still behind: %+v", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testenvEventually polls cond until it holds or within passes.
func testenvEventually(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventsPerStream counts the events of type in each of streams, straight from the log.
func eventsPerStream(t *testing.T, c *cli, typ string, streams []string) map[string]int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT stream, count(*) FROM events WHERE type = $1 AND stream = ANY($2) GROUP BY stream`, typ, streams)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBulkActionsBlackBox cancels 500 waiting runs with one bulk action and re-runs a
// workflow's failed runs with another, through the signed SDK routes of the built binary.
func TestBulkActionsBlackBox(t *testing.T) {
	svc := startSDKService(t, 100000, "SWITCHYARD_RATE_LIMIT=5000", "SWITCHYARD_RATE_BURST=5000")
	c := svc.caller(t, svc.key)
	hold := svc.createWorkflow(t, svc.key.WorkspaceID, holdDef)["id"].(string)

	t.Run("bulk cancel of 500 runs cancels each once", func(t *testing.T) {
		const n = 500
		ids := make([]string, n)
		streams := make([]string, n)
		for i := range ids {
			ids[i] = c.trigger(t, hold, "")
			streams[i] = "run-" + ids[i]
		}
		waitRunsReadModel(t, svc.cli)
		id, matched := c.bulk(t, hold, `{"action": "cancel", "reason": "bulk test"}`)
		if matched != n {
			t.Fatalf("matched %d runs, want %d", matched, n)
		}
		d := pollBulk(t, c, id, 120*time.Second)
		if d.Done != n || d.Failed != 0 || d.Matched != n || d.Action != bulk.ActionCancel || d.Reason != "bulk test" || d.CompletedAt == nil {
			t.Fatalf("bulk cancel ended %+v", d)
		}
		for _, run := range ids {
			m := pollRun(t, c, run, 10*time.Second, terminal)
			if m["status"] != "FAILED" || m["cancelRequestedAt"] == nil || m["cancelReason"] != "bulk test" {
				t.Fatalf("run %s after the bulk cancel: %v", run, m)
			}
		}
		counts := eventsPerStream(t, svc.cli, "RunCancelRequested", streams)
		for _, s := range streams {
			if counts[s] != 1 {
				t.Fatalf("%s has %d cancellations, want 1", s, counts[s])
			}
		}
		// Nothing is left to cancel: a second bulk matches no run and completes at once.
		again, matched := c.bulk(t, hold, `{"action": "cancel"}`)
		if d := pollBulk(t, c, again, 10*time.Second); matched != 0 || d.Matched != 0 || d.Done != 0 {
			t.Fatalf("second bulk cancel: matched %d, %+v", matched, d)
		}
	})

	t.Run("bulk rerun of failed runs re-runs each failed run once", func(t *testing.T) {
		flaky := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "flaky", "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "f", "module": "core.fail", "config": {"code": "boom"}}],
		  "edges": [{"from": "t", "to": "f", "when": "trigger.fail == true"}]}`)["id"].(string)
		var failed, completed []string
		for i := range 5 {
			fail := i < 3
			m := pollRun(t, c, c.trigger(t, flaky, fmt.Sprintf(`{"fail": %v}`, fail)), 30*time.Second, terminal)
			if fail {
				failed = append(failed, m["id"].(string))
			} else {
				completed = append(completed, m["id"].(string))
			}
		}
		waitRunsReadModel(t, svc.cli)
		id, matched := c.bulk(t, flaky, `{"action": "rerun", "filter": {"status": "FAILED"}}`)
		if matched != len(failed) {
			t.Fatalf("matched %d runs, want the %d failed", matched, len(failed))
		}
		if d := pollBulk(t, c, id, 60*time.Second); d.Done != len(failed) || d.Failed != 0 {
			t.Fatalf("bulk rerun ended %+v", d)
		}
		var reruns []string
		for _, orig := range failed {
			re := bulk.RerunID(id, orig)
			m := pollRun(t, c, re, 30*time.Second, terminal)
			if m["rerunOf"] != orig || m["status"] != "FAILED" {
				t.Fatalf("re-run of %s: %v", orig, m)
			}
			reruns = append(reruns, "run-"+re)
		}
		for s, n := range eventsPerStream(t, svc.cli, "RunTriggered", reruns) {
			if n != 1 {
				t.Fatalf("%s triggered %d times", s, n)
			}
		}
		// The completed runs were not matched: no re-run of theirs exists.
		for _, orig := range completed {
			r := c.do(http.MethodGet, "/v1/sdk/workflows/executions/"+bulk.RerunID(id, orig), nil)
			mustStatus(t, r, http.StatusNotFound, "re-run of a completed run")
		}
	})

	t.Run("the Go client triggers with a key and follows a bulk", func(t *testing.T) {
		ctx := context.Background()
		gc, err := client.New(svc.cli.url(""), svc.key.APIKey, svc.key.APISecret)
		if err != nil {
			t.Fatal(err)
		}
		first, err := gc.TriggerWorkflow(ctx, hold, map[string]any{"n": 1}, client.WithTriggerIdempotencyKey("bulk-e2e"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := gc.TriggerWorkflow(ctx, hold, map[string]any{"n": 1}, client.WithTriggerIdempotencyKey("bulk-e2e"))
		if err != nil || len(first) != 1 || fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("a keyed trigger repeated: %v then %v (%v)", first, again, err)
		}
		if _, err := gc.TriggerWorkflow(ctx, hold, map[string]any{"n": 2}, client.WithTriggerIdempotencyKey("bulk-e2e")); !client.IsStatus(err, http.StatusConflict) {
			t.Fatalf("the key with another body: %v, want 409", err)
		}
		waitRunsReadModel(t, svc.cli)
		acc, err := gc.BulkRuns(ctx, hold, client.BulkRequest{Action: client.BulkActionCancel, Reason: "client"})
		if err != nil || acc.Matched != 1 {
			t.Fatalf("bulk through the client: %+v, %v", acc, err)
		}
		var b *client.Bulk
		testenvEventually(t, 30*time.Second, func() bool {
			b, err = gc.BulkStatus(ctx, acc.BulkID)
			return err == nil && b.Completed()
		})
		if b.Done != 1 || b.Reason != "client" {
			t.Fatalf("bulk status through the client: %+v", b)
		}
		if r, err := gc.GetRun(ctx, first[0].RunID); err != nil || r.CancelReason == nil || *r.CancelReason != "client" {
			t.Fatalf("the keyed run after the bulk: %+v, %v", r, err)
		}
		if _, err := gc.ReplayRunCallback(ctx, first[0].RunID); !client.IsStatus(err, http.StatusConflict) {
			t.Fatalf("replay of a run without notify: %v, want 409", err)
		}
	})

	t.Run("the CLI starts and shows bulks", func(t *testing.T) {
		ws := svc.key.WorkspaceID
		var started httpapi.BulkAccepted
		svc.cli.okJSON(&started, "admin", "workflow", "bulk", hold, "--workspace", ws, "--action", "cancel", "--created-after", "2020-01-01T00:00:00Z", "--json")
		if started.BulkID == "" || started.Matched != 0 {
			t.Fatalf("workflow bulk printed %+v", started)
		}
		d := pollBulk(t, c, started.BulkID, 10*time.Second)
		var shown bulk.Detail
		svc.cli.okJSON(&shown, "admin", "workflow", "bulk-status", started.BulkID, "--workspace", ws, "--json")
		if shown.ID != d.ID || shown.Status != bulk.StatusCompleted || shown.Filter.CreatedAfter == nil {
			t.Fatalf("workflow bulk-status printed %+v", shown)
		}
		if res := svc.cli.run("admin", "workflow", "bulk", hold, "--workspace", ws, "--action", "pause"); res.code == 0 || !strings.Contains(res.stderr, "action") {
			t.Fatalf("a bad --action: %s", res)
		}
	})

	t.Run("bad bulks are 400s naming the field", func(t *testing.T) {
		path := "/v1/sdk/workflows/" + hold + "/runs/bulk"
		for field, body := range map[string]string{
			"action":               `{"action": "delete"}`,
			"action is required":   `{"filter": {}}`,
			"filter.status":        `{"action": "cancel", "filter": {"status": "DONE"}}`,
			"filter.createdAfter":  `{"action": "rerun", "filter": {"createdAfter": "yesterday"}}`,
			"filter.createdBefore": `{"action": "rerun", "filter": {"createdBefore": "2026-13-01"}}`,
			"reason":               `{"action": "cancel", "reason": "` + strings.Repeat("x", 1001) + `"}`,
		} {
			wantErrorBody(t, c.post(path, body), http.StatusBadRequest, strings.TrimSuffix(field, " is required"))
		}
		wantErrorBody(t, c.post(path, `{"action": "rerun", "filter": {"createdAfter": "2026-02-01T00:00:00Z", "createdBefore": "2026-01-01T00:00:00Z"}}`),
			http.StatusBadRequest, "filter.createdAfter: must not be after filter.createdBefore")
		wantErrorBody(t, c.post(path, `{"action": "rerun", "filter": {"status": "EXECUTING"}}`), http.StatusBadRequest, "filter.status")
		wantErrorBody(t, c.post("/v1/sdk/workflows/00000000-0000-0000-0000-000000000000/runs/bulk", `{"action": "cancel"}`), http.StatusNotFound, "")
		wantErrorBody(t, c.do(http.MethodGet, "/v1/sdk/workflows/bulk/00000000-0000-0000-0000-000000000000", nil), http.StatusNotFound, "")
	})

	t.Run("scoped keys and other workspaces", func(t *testing.T) {
		mine, _ := c.bulk(t, hold, `{"action": "cancel"}`)
		other := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "other", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)["id"].(string)
		scoped := svc.caller(t, svc.newKey(t, svc.key.WorkspaceID, "--allowed-workflow", other))
		wantErrorBody(t, scoped.post("/v1/sdk/workflows/"+hold+"/runs/bulk", `{"action": "cancel"}`), http.StatusForbidden, hold)
		wantErrorBody(t, scoped.do(http.MethodGet, "/v1/sdk/workflows/bulk/"+mine, nil), http.StatusForbidden, hold)
		scoped.bulk(t, other, `{"action": "cancel"}`)

		var ws struct {
			WorkspaceID string `json:"workspaceId"`
		}
		svc.cli.okJSON(&ws, "admin", "workspace", "create", "--name", "elsewhere", "--owner", "owner@example.com", "--json")
		stranger := svc.caller(t, svc.newKey(t, ws.WorkspaceID))
		wantErrorBody(t, stranger.do(http.MethodGet, "/v1/sdk/workflows/bulk/"+mine, nil), http.StatusNotFound, "")
		wantErrorBody(t, stranger.post("/v1/sdk/workflows/"+hold+"/runs/bulk", `{"action": "cancel"}`), http.StatusNotFound, "")
	})
}

// A serve process killed with SIGKILL in the middle of a bulk cancel: the restarted service
// resumes the bulk on the same runs, every run is cancelled exactly once and the bulk counts
// each run done once, the batch that was acted on but not recorded included.
func TestSIGKILLDuringABulkCancel(t *testing.T) {
	svc := startSDKService(t, 100000, "SWITCHYARD_RATE_LIMIT=5000", "SWITCHYARD_RATE_BURST=5000")
	c := svc.caller(t, svc.key)
	hold := svc.createWorkflow(t, svc.key.WorkspaceID, holdDef)["id"].(string)
	const n = 1000
	streams := make([]string, n)
	for i := range streams {
		streams[i] = "run-" + c.trigger(t, hold, "")
	}
	waitRunsReadModel(t, svc.cli)
	id, matched := c.bulk(t, hold, `{"action": "cancel", "reason": "crash"}`)
	if matched != n {
		t.Fatalf("matched %d runs, want %d", matched, n)
	}
	var before bulk.Detail
	testenvEventually(t, 60*time.Second, func() bool {
		r := c.do(http.MethodGet, "/v1/sdk/workflows/bulk/"+id, nil)
		mustStatus(t, r, http.StatusOK, "GET bulk")
		if err := json.Unmarshal(r.body, &before); err != nil {
			t.Fatal(err)
		}
		return before.Done > 0
	})
	if before.Status == bulk.StatusCompleted {
		t.Fatalf("the premise failed: the bulk completed before the kill: %+v", before)
	}
	t.Logf("killing the service with %d of %d runs marked", before.Done, n)
	if err := svc.srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-svc.srv.done
	restarted := svc.cli.serve()
	svc.cli.waitHTTP(restarted, "/readyz", 60*time.Second, func(status int, _ string) bool { return status == http.StatusOK })

	d := pollBulk(t, c, id, 120*time.Second)
	if d.Done != n || d.Failed != 0 {
		t.Fatalf("the resumed bulk ended %+v (it had done %d before the kill)", d, before.Done)
	}
	counts := eventsPerStream(t, svc.cli, "RunCancelRequested", streams)
	for _, s := range streams {
		if counts[s] != 1 {
			t.Fatalf("%s has %d cancellations, want 1", s, counts[s])
		}
	}
	restarted.stop(t, 30*time.Second)
}
