package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/projections"
)

// eventDefs are the two listeners of the crash test: one run per event, and a digest that
// debounces the events by customer.
const (
	paidDef = `{"name": "paid", "components": [
	{"id": "on", "module": "ON_EVENT", "config": {"name": "order.paid"}},
	{"id": "echo", "module": "core.echo"}], "edges": [{"from": "on", "to": "echo"}]}`
	digestDef = `{"name": "digest", "components": [
	{"id": "on", "module": "ON_EVENT", "config": {"name": "order.paid",
		"debounce": {"key": "customer", "quietMs": 300, "maxWaitMs": 2000, "maxItems": 7}}},
	{"id": "echo", "module": "core.echo"}], "edges": [{"from": "on", "to": "echo"}]}`
)

// trySendEvent POSTs an event, reporting a transport error (a killed service) instead of
// failing the test.
func (c *rawCaller) trySendEvent(body string) (int, []byte, error) {
	path := "/v1/sdk/events?nonce=" + strconv.FormatInt(nonces.Add(1), 10)
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(c.priv, []byte("POST|"+path+"|"+stamp+"|"+body)))
	req, err := http.NewRequest(http.MethodPost, c.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Api-Key", c.key.APIKey)
	req.Header.Set("X-Sdk-Timestamp", stamp)
	req.Header.Set("X-Sdk-Signature", sig)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

type eventAnswer struct {
	EventID string `json:"eventId"`
	Runs    []struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
	} `json:"runs"`
}

// waitProjector waits until projector name has applied the whole log.
func waitProjector(t *testing.T, c *cli, name string) {
	t.Helper()
	testenvEventually(t, 60*time.Second, func() bool {
		var status []projections.Status
		c.okJSON(&status, "projections", "status", "--json")
		for _, s := range status {
			if s.Name == name && s.Lag == 0 && !s.LagCapped {
				return true
			}
		}
		return false
	})
}

// A serve process killed with SIGKILL while events arrive, then every event sent again (as a
// client whose requests failed retries them): no event starts a run twice, none is lost, and
// every payload reaches exactly one debounced run.
func TestSIGKILLWhileEventsArrive(t *testing.T) {
	svc := startSDKService(t, 1000000, "SWITCHYARD_RATE_LIMIT=5000", "SWITCHYARD_RATE_BURST=5000")
	c := svc.caller(t, svc.key)
	paid := svc.createWorkflow(t, svc.key.WorkspaceID, paidDef)["id"].(string)
	digest := svc.createWorkflow(t, svc.key.WorkspaceID, digestDef)["id"].(string)
	waitProjector(t, svc.cli, "eventtriggers")

	const n = 400
	body := func(i int) string {
		return fmt.Sprintf(`{"name": "order.paid", "id": "order-%d", "payload": {"customer": "c%d", "i": %d}}`, i, i%9, i)
	}
	before := make([]string, n) // the paid run answered before the kill, by event
	var answered atomic.Int64
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				status, b, err := c.trySendEvent(body(i))
				var a eventAnswer
				if err != nil || status != http.StatusOK || json.Unmarshal(b, &a) != nil {
					continue // the kill: sent again below
				}
				for _, r := range a.Runs {
					if r.WorkflowID == paid {
						before[i] = r.RunID
					}
				}
				if answered.Add(1) == n/3 {
					once.Do(func() { close(killed) })
				}
			}
		}()
	}
	go func() {
		<-killed
		if err := svc.srv.cmd.Process.Kill(); err != nil {
			t.Error(err)
		}
	}()
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	<-svc.srv.done
	t.Logf("killed the service with %d of %d events answered", answered.Load(), n)
	restarted := svc.cli.serveReady()

	for i := range n {
		status, b, err := c.trySendEvent(body(i))
		var a eventAnswer
		if err != nil || status != http.StatusOK || json.Unmarshal(b, &a) != nil {
			t.Fatalf("event %d sent again: %d %s %v", i, status, b, err)
		}
		var run string
		for _, r := range a.Runs {
			if r.WorkflowID == paid {
				run = r.RunID
			}
		}
		if run == "" || (before[i] != "" && before[i] != run) {
			t.Fatalf("event %d: answered run %q before the kill, %q after", i, before[i], run)
		}
	}

	conn := svc.cli.connect(t)
	defer conn.Close(context.Background())
	// Every debounced window's run has started (the last ones 300 ms after their last event).
	testenvEventually(t, 60*time.Second, func() bool {
		var open int
		err := conn.QueryRow(context.Background(), `SELECT
			(SELECT count(DISTINCT stream) FROM events WHERE type = 'DebounceBuffered') -
			(SELECT count(DISTINCT stream) FROM events WHERE type = 'DebounceStarted')`).Scan(&open)
		return err == nil && open == 0
	})
	rows, err := conn.Query(context.Background(), `SELECT stream, data->>'workflowId', data->'input' FROM events WHERE type = 'RunTriggered'`)
	if err != nil {
		t.Fatal(err)
	}
	perStream := map[string]int{}
	paidRuns, gathered := 0, make([]int, n)
	for rows.Next() {
		var stream, wf string
		var input []byte
		if err := rows.Scan(&stream, &wf, &input); err != nil {
			t.Fatal(err)
		}
		perStream[stream]++
		switch wf {
		case paid:
			paidRuns++
		case digest:
			var in struct{ Events []struct{ I int } }
			if err := json.Unmarshal(input, &in); err != nil || len(in.Events) == 0 {
				t.Fatalf("digest run input %s", input)
			}
			for _, e := range in.Events {
				gathered[e.I]++
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for s, k := range perStream {
		if k != 1 {
			t.Fatalf("%s was triggered %d times", s, k)
		}
	}
	if paidRuns != n {
		t.Fatalf("%d events started %d runs of the plain listener, want one each", n, paidRuns)
	}
	for i, k := range gathered {
		if k != 1 {
			t.Fatalf("event %d reached %d debounced runs, want 1", i, k)
		}
	}
	stopAndAudit(t, svc.cli, restarted, svc.key.WorkspaceID)
}
