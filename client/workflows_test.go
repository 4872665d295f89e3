package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/httpapi"
)

// seen is what a fake endpoint received.
type seen struct {
	method, path, query, body string
}

// recorder collects requests behind the real SDK authentication and answers with respond.
func recorder(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) (*client.Client, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	srv, m := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		q := r.URL.Query()
		q.Del("nonce") // the client's replay nonce on every POST
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, q.Encode(), string(b)})
		mu.Unlock()
		respond(w, r)
	})
	c, err := client.New(srv.URL, m.APIKey, m.APISecret, client.WithBackoff(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got...)
	}
}

const runJSON = `{"id":"r1","workflowId":"wf1","status":"FAILED","pendingStageCount":0,"failedStageCount":1,
"cancelRequestedAt":"2026-01-02T03:04:05Z","cancelReason":"stop","totalUsage":1.5,"error":{"message":"canceled"},
"createdAt":"2026-01-02T03:04:00Z","updatedAt":"2026-01-02T03:04:06Z","runStages":[
{"id":"s1","module":"core.echo","status":"COMPLETED","output":{"a":1},"error":null,"creditUsage":1,"executionEventId":"e1",
"executionDispatchedAt":"2026-01-02T03:04:01Z","executionAttempt":1,"referenceId":"c1","name":"Echo","iteration":-1,
"parentStageId":null,"updatedAt":"2026-01-02T03:04:02Z"}]}`

func TestWorkflowMethods(t *testing.T) {
	ctx := context.Background()
	c, requests := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/sdk/workflows/wf1":
			io.WriteString(w, `[{"runId":"r1","jobId":"j1"}]`)
		case r.URL.Path == "/v1/sdk/workflows/executions/r1", r.URL.Path == "/v1/sdk/workflows/executions/r1/cancel":
			io.WriteString(w, runJSON)
		case r.URL.Path == "/v1/sdk/workflows/executions/r1/rerun":
			io.WriteString(w, `{"runId":"r2","jobId":"j2"}`)
		case r.URL.Path == "/v1/sdk/workflows/executions/done/cancel":
			httpapi.WriteError(w, http.StatusConflict, "the run has already finished")
		case r.URL.Path == "/v1/sdk/workflows/wf1/components/c%201", r.URL.Path == "/v1/sdk/workflows/wf1/components/c 1":
			io.WriteString(w, `{"id":"c 1","name":"Renamed","position":[10,20.5],"config":{"k":"v","x":1},"updatedAt":"2026-01-02T03:04:05Z"}`)
		case r.URL.Path == "/v1/sdk/workflows":
			io.WriteString(w, `{"data":[{"id":"wf1","name":"One","createdAt":"2026-01-02T03:04:05Z"}],"total":3,"page":2,"totalPages":3}`)
		default:
			httpapi.WriteError(w, http.StatusNotFound, "no route")
		}
	})

	runs, err := c.TriggerWorkflow(ctx, "wf1", map[string]any{"order": 7})
	if err != nil || len(runs) != 1 || runs[0] != (client.TriggeredRun{RunID: "r1", JobID: "j1"}) {
		t.Fatalf("trigger: %+v, %v", runs, err)
	}
	if _, err := c.TriggerWorkflow(ctx, "wf1", nil); err != nil {
		t.Fatalf("trigger without input: %v", err)
	}

	run, err := c.GetRun(ctx, "r1")
	if err != nil {
		t.Fatalf("get run: %v", err)
	}
	st := run.RunStages[0]
	if run.WorkflowID != "wf1" || run.Status != client.StatusFailed || !run.Terminal() || run.FailedStageCount != 1 ||
		run.CancelRequestedAt == nil || *run.CancelReason != "stop" || run.TotalUsage != 1.5 || string(run.Error) != `{"message":"canceled"}` ||
		len(run.RunStages) != 1 || st.Iteration != -1 || st.ParentStageID != nil || st.ReferenceID != "c1" || st.Name != "Echo" ||
		*st.ExecutionEventID != "e1" || st.ExecutionAttempt != 1 || string(st.Output) != `{"a":1}` {
		t.Fatalf("run decoded as %+v", run)
	}

	if _, err := c.CancelRun(ctx, "r1", "stop"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := c.CancelRun(ctx, "r1", ""); err != nil {
		t.Fatalf("cancel without reason: %v", err)
	}
	if got, err := c.RerunRun(ctx, "r1", client.Rerun{FromStage: "c1"}); err != nil || got != (client.TriggeredRun{RunID: "r2", JobID: "j2"}) {
		t.Fatalf("rerun: %+v, %v", got, err)
	}
	if _, err := c.CancelRun(ctx, "done", ""); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("cancel of a finished run: %v, want the typed 409", err)
	}

	snap, err := c.UpdateComponent(ctx, "wf1", "c 1", client.ComponentUpdate{Name: "Renamed", Position: &[2]float64{10, 20.5},
		Config: map[string]any{"k": "v"}})
	if err != nil || snap.Name != "Renamed" || snap.Position != [2]float64{10, 20.5} || string(snap.Config) != `{"k":"v","x":1}` {
		t.Fatalf("update component: %+v, %v", snap, err)
	}

	page, err := c.ListWorkflows(ctx, 2, 1)
	if err != nil || page.Total != 3 || page.Page != 2 || len(page.Data) != 1 || page.Data[0].Name != "One" {
		t.Fatalf("list workflows: %+v, %v", page, err)
	}

	want := []seen{
		{"POST", "/v1/sdk/workflows/wf1", "", `{"order":7}`},
		{"POST", "/v1/sdk/workflows/wf1", "", ``},
		{"GET", "/v1/sdk/workflows/executions/r1", "", ``},
		{"POST", "/v1/sdk/workflows/executions/r1/cancel", "", `{"reason":"stop"}`},
		{"POST", "/v1/sdk/workflows/executions/r1/cancel", "", ``},
		{"POST", "/v1/sdk/workflows/executions/r1/rerun", "", `{"fromStage":"c1"}`},
		{"POST", "/v1/sdk/workflows/executions/done/cancel", "", ``},
		{"POST", "/v1/sdk/workflows/wf1/components/c 1", "", `{"config":{"k":"v"},"name":"Renamed","position":[10,20.5]}`},
		{"GET", "/v1/sdk/workflows", "limit=1&page=2", ``},
	}
	got := requests()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests:\n got %q\nwant %q", got, want)
	}
}

// sseScript serves the run stream: each connection gets the next script entry (messages, then
// either hang until the client leaves or close), and the Last-Event-ID of every connection is
// recorded.
type sseScript struct {
	mu          sync.Mutex
	conns       [][]string
	hang        []bool
	lastEventID []string
}

func (s *sseScript) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.lastEventID)
	s.lastEventID = append(s.lastEventID, r.Header.Get("Last-Event-ID"))
	var msgs []string
	hang := true
	if n < len(s.conns) {
		msgs, hang = s.conns[n], s.hang[n]
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, "retry: 1\n\n: ping\n\n")
	for _, m := range msgs {
		io.WriteString(w, m)
	}
	w.(http.Flusher).Flush()
	if hang {
		<-r.Context().Done()
	}
}

func runEvent(id, status, output string) string {
	output = strings.ReplaceAll(output, "\n", "") // one data line per message
	return fmt.Sprintf("id: %s\ndata: {\"id\":\"r1\",\"status\":%q,\"output\":%s,\"timestamp\":\"2026-01-02T03:04:05Z\"}\n\n", id, status, output)
}

func TestStreamRunReconnectsAndToleratesCanceled(t *testing.T) {
	script := &sseScript{
		conns: [][]string{
			{runEvent("1", "CREATED", `{}`), runEvent("2", "EXECUTING", `{"pendingStageCount":2,"nonTerminalStages":[
{"id":"s1","module":"core.echo","status":"RUNNING","referenceId":"c1","iteration":0,"parentStageId":"s0","executionEventId":null,
"executionDispatchedAt":null,"executionAttempt":1,"updatedAt":"2026-01-02T03:04:05Z"}]}`)},
			{runEvent("3", "CANCELED", `{"cancelRequestedAt":"2026-01-02T03:04:06Z","cancelReason":"user"}`), runEvent("4", "EXECUTING", `{}`)},
		},
		hang: []bool{false, true},
	}
	c, _ := recorder(t, script.serve)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var statuses []string
	for e, err := range c.StreamRun(ctx, "r1", nil) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		statuses = append(statuses, e.Status+"/"+e.EventID)
		if e.Status == client.RunStatusExecuting {
			s := e.Output.NonTerminalStages
			if e.Output.PendingStageCount != 2 || len(s) != 1 || s[0].Iteration != 0 || *s[0].ParentStageID != "s0" || s[0].ExecutionEventID != nil {
				t.Fatalf("EXECUTING event decoded as %+v", e.Output)
			}
		}
		if e.Status == client.RunStatusCanceled && (!e.Terminal() || !e.Canceled() || *e.Output.CancelReason != "user") {
			t.Fatalf("CANCELED event: terminal %v canceled %v %+v", e.Terminal(), e.Canceled(), e.Output)
		}
	}
	if got := strings.Join(statuses, " "); got != "CREATED/1 EXECUTING/2 CANCELED/3" {
		t.Fatalf("events %q: want the stream to end at the tolerated CANCELED", got)
	}
	script.mu.Lock()
	defer script.mu.Unlock()
	if fmt.Sprint(script.lastEventID) != "[ 2]" {
		t.Fatalf("Last-Event-ID per connection %q, want the reconnection to resume after 2", script.lastEventID)
	}
}

func TestWaitForRun(t *testing.T) {
	t.Run("returns the terminal event", func(t *testing.T) {
		script := &sseScript{conns: [][]string{{runEvent("1", "EXECUTING", `{}`),
			runEvent("2", "FAILED", `{"cancelRequestedAt":"2026-01-02T03:04:06Z","cancelReason":null,"failedStageCount":0}`)}}, hang: []bool{true}}
		c, _ := recorder(t, script.serve)
		e, err := c.WaitForRun(context.Background(), "r1", nil)
		if err != nil || e.Status != client.StatusFailed || !e.Canceled() || e.Output.CancelReason != nil {
			t.Fatalf("wait: %+v, %v", e, err)
		}
	})
	t.Run("times out with the specified text", func(t *testing.T) {
		script := &sseScript{conns: [][]string{{runEvent("1", "EXECUTING", `{}`)}}, hang: []bool{true}}
		c, _ := recorder(t, script.serve)
		_, err := c.WaitForRun(context.Background(), "r1", &client.WaitOptions{TimeoutMs: 300})
		if !errors.Is(err, client.ErrTimeout) || err.Error() != "Execution timed out" {
			t.Fatalf("err = %v, want exactly %q", err, "Execution timed out")
		}
	})
	t.Run("a 404 ends the wait", func(t *testing.T) {
		c, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) { httpapi.WriteError(w, http.StatusNotFound, "not found") })
		if _, err := c.WaitForRun(context.Background(), "nope", nil); !client.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("err = %v, want the typed 404", err)
		}
	})
}

func TestRetriesBackOffOn502UpToTheLimit(t *testing.T) {
	var calls atomic.Int32
	c, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		httpapi.WriteError(w, http.StatusBadGateway, "upstream unavailable")
	})
	_, err := c.GetRun(context.Background(), "r1")
	if !client.IsStatus(err, http.StatusBadGateway) || calls.Load() != 4 {
		t.Fatalf("err %v after %d calls, want the typed 502 after 1 call and 3 retries", err, calls.Load())
	}

	calls.Store(0)
	srv, m := server(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		httpapi.WriteError(w, http.StatusBadGateway, "upstream unavailable")
	})
	none, err := client.New(srv.URL, m.APIKey, m.APISecret, client.WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.GetRun(context.Background(), "r1"); !client.IsStatus(err, http.StatusBadGateway) || calls.Load() != 1 {
		t.Fatalf("WithRetries(0): %v after %d calls, want one call", err, calls.Load())
	}
}

func TestRetryAfterIsWaitedFor(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	c, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			httpapi.WriteError(w, http.StatusTooManyRequests, "rate limit exceeded")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `[]`)
	})
	if _, err := c.TriggerWorkflow(context.Background(), "wf1", nil); err != nil {
		t.Fatalf("trigger after a 429: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// A lower bound only: the retry must not come before the server said it may.
	if len(at) != 2 || at[1].Sub(at[0]) < time.Second {
		t.Fatalf("%d calls, retried after %v; want one retry no sooner than Retry-After: 1", len(at), at[len(at)-1].Sub(at[0]))
	}

	// A Retry-After beyond the caller's deadline is not waited for: the 429 comes back at once,
	// while the context is still live.
	c2, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		httpapi.WriteError(w, http.StatusTooManyRequests, "rate limit exceeded")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c2.GetRun(ctx, "r1")
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.RetryAfter != time.Hour || ctx.Err() != nil {
		t.Fatalf("err %#v (ctx %v), want the 429 with RetryAfter 1h returned before the deadline", err, ctx.Err())
	}
}

func TestRunTypesMatchTheWire(t *testing.T) {
	// Unknown members are ignored and absent optional ones stay zero, so a newer server does
	// not break an older client.
	var e client.RunEvent
	if err := json.Unmarshal([]byte(`{"id":"r","status":"EXECUTING","output":{"future":1},"timestamp":"2026-01-02T03:04:05Z","extra":true}`), &e); err != nil {
		t.Fatal(err)
	}
	if e.Terminal() || e.Canceled() || e.Output.NonTerminalStages != nil {
		t.Fatalf("decoded %+v", e)
	}
}

// A stream refused for now (503 while the database restarts, 429 past the stream cap) is
// opened again after the answer's Retry-After, and the wait goes on; other errors end it.
func TestStreamsReconnectAfterRetryableAnswers(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			script := &sseScript{conns: [][]string{{runEvent("1", "COMPLETED", `{}`)}}, hang: []bool{false}}
			var calls atomic.Int32
			c, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.Header().Set("Retry-After", "0")
					httpapi.WriteError(w, status, "not now")
					return
				}
				script.serve(w, r)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e, err := c.WaitForRun(ctx, "r1", nil)
			if err != nil || e.Status != client.StatusCompleted || calls.Load() != 2 {
				t.Fatalf("wait: %+v, %v after %d calls", e, err, calls.Load())
			}
		})
	}
}
