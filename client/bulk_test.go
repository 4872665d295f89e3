package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/httpapi"
)

// The bulk, replay and keyed trigger methods send the documented requests and decode the
// answers; a keyed trigger carries its key on every attempt; a bulk is never retried.
func TestBulkReplayAndKeyedTrigger(t *testing.T) {
	ctx := context.Background()
	var keys []string
	var bulkCalls atomic.Int32
	c, requests := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/sdk/workflows/wf1":
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			if len(keys) == 1 {
				w.Header().Set("Retry-After", "0")
				httpapi.WriteError(w, http.StatusServiceUnavailable, "service temporarily unavailable; retry later")
				return
			}
			io.WriteString(w, `[{"runId":"r1","jobId":"j1"}]`)
		case r.URL.Path == "/v1/sdk/workflows/executions/r1/replay-callback":
			io.WriteString(w, runJSON)
		case r.URL.Path == "/v1/sdk/workflows/wf1/runs/bulk":
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, `{"bulkId":"b1","matched":500}`)
		case r.URL.Path == "/v1/sdk/workflows/wf2/runs/bulk":
			bulkCalls.Add(1)
			w.Header().Set("Retry-After", "0")
			httpapi.WriteError(w, http.StatusServiceUnavailable, "service temporarily unavailable; retry later")
		case r.URL.Path == "/v1/sdk/workflows/bulk/b1":
			io.WriteString(w, `{"id":"b1","workflowId":"wf1","action":"cancel","filter":{"status":"EXECUTING"},"reason":"x",
				"status":"COMPLETED","matched":2,"done":1,"failed":1,"failures":[{"runId":"r9","error":"already finished"}],
				"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:06Z","completedAt":"2026-01-02T03:04:06Z"}`)
		default:
			httpapi.WriteError(w, http.StatusNotFound, "no route")
		}
	})

	runs, err := c.TriggerWorkflow(ctx, "wf1", map[string]any{"n": 1}, client.WithTriggerIdempotencyKey("order-7"))
	if err != nil || len(runs) != 1 || runs[0].RunID != "r1" {
		t.Fatalf("keyed trigger: %+v, %v", runs, err)
	}
	if _, err := c.TriggerWorkflow(ctx, "wf1", nil); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0] != "order-7" || keys[1] != "order-7" || keys[2] != "" {
		t.Fatalf("Idempotency-Key of the attempts: %q; want order-7 twice, then none", keys)
	}
	if run, err := c.ReplayRunCallback(ctx, "r1"); err != nil || run.ID != "r1" {
		t.Fatalf("replay run callback: %+v, %v", run, err)
	}
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	acc, err := c.BulkRuns(ctx, "wf1", client.BulkRequest{Action: client.BulkActionCancel, Reason: "x",
		Filter: client.BulkFilter{Status: "EXECUTING", CreatedAfter: &after}})
	if err != nil || acc != (client.BulkAccepted{BulkID: "b1", Matched: 500}) {
		t.Fatalf("bulk: %+v, %v", acc, err)
	}
	if _, err := c.BulkRuns(ctx, "wf2", client.BulkRequest{Action: client.BulkActionRerun}); !client.IsStatus(err, http.StatusServiceUnavailable) || bulkCalls.Load() != 1 {
		t.Fatalf("a bulk answered 503: %v after %d calls, want the 503 at once", err, bulkCalls.Load())
	}
	b, err := c.BulkStatus(ctx, "b1")
	if err != nil || !b.Completed() || b.Done != 1 || b.Failed != 1 || len(b.Failures) != 1 || b.Failures[0].RunID != "r9" ||
		b.Filter.Status != "EXECUTING" || b.CompletedAt == nil {
		t.Fatalf("bulk status: %+v, %v", b, err)
	}

	want := []seen{
		{"POST", "/v1/sdk/workflows/wf1", "", `{"n":1}`},
		{"POST", "/v1/sdk/workflows/wf1", "", `{"n":1}`},
		{"POST", "/v1/sdk/workflows/wf1", "", ``},
		{"POST", "/v1/sdk/workflows/executions/r1/replay-callback", "", ``},
		{"POST", "/v1/sdk/workflows/wf1/runs/bulk", "", `{"action":"cancel","filter":{"status":"EXECUTING","createdAfter":"2026-01-01T00:00:00Z"},"reason":"x"}`},
		{"POST", "/v1/sdk/workflows/wf2/runs/bulk", "", `{"action":"rerun","filter":{}}`},
		{"GET", "/v1/sdk/workflows/bulk/b1", "", ``},
	}
	if got := requests(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests:\n got %q\nwant %q", got, want)
	}
}
