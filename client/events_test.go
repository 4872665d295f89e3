package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/switchyard/switchyard/client"
)

// SendEvent posts the event with an id of its own when given none, and sends the same id on
// its retries, so a retried call is one event.
func TestSendEventRetriesWithOneID(t *testing.T) {
	var calls atomic.Int32
	c, got := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = w.Write([]byte(`{"eventId": "e1", "runs": [{"workflowId": "wf1", "runId": "r1"}]}`))
	})
	out, err := c.SendEvent(context.Background(), client.Event{Name: "order.paid", Payload: map[string]any{"amount": 3}})
	if err != nil || out.EventID != "e1" || len(out.Runs) != 1 || out.Runs[0].RunID != "r1" {
		t.Fatalf("SendEvent: %+v %v", out, err)
	}
	reqs := got()
	if len(reqs) != 2 || reqs[0].path != "/v1/sdk/events" || reqs[0].body != reqs[1].body {
		t.Fatalf("requests %+v", reqs)
	}
	var sent client.Event
	if err := json.Unmarshal([]byte(reqs[0].body), &sent); err != nil || sent.ID == "" || sent.Name != "order.paid" {
		t.Fatalf("sent %s", reqs[0].body)
	}
}
