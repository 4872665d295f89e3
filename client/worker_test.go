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
	"testing"
	"time"

	"github.com/switchyard/switchyard/client"
)

// fakeTasks is a task service behind the real SDK authentication: it hands out the tasks
// queued, answers heartbeats as told, and records every outcome.
type fakeTasks struct {
	mu        sync.Mutex
	queue     []client.Task
	cancelled map[string]bool
	lost      map[string]bool
	outcomes  map[string]map[string]any
	beats     map[string]int
	done      chan string
	// batches lists the sizes of the batch route's requests; noBatch makes that route 404,
	// as a service older than it answers.
	batches []int
	noBatch bool
	// gate, when set, holds every completion request until it is closed; held hears of each.
	gate, held chan struct{}
}

func newFakeTasks(tasks ...client.Task) *fakeTasks {
	return &fakeTasks{queue: tasks, cancelled: map[string]bool{}, lost: map[string]bool{}, outcomes: map[string]map[string]any{},
		beats: map[string]int{}, done: make(chan string, 64)}
}

func (f *fakeTasks) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	path := r.URL.Path
	if f.gate != nil && strings.HasSuffix(path, "/complete") {
		f.held <- struct{}{}
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case path == "/v1/sdk/tasks/complete" && f.noBatch:
		f.batches = append(f.batches, 0) // tried, refused
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"statusCode":404,"error":"Not Found","message":"no route"}`)
	case path == "/v1/sdk/tasks/complete":
		var b struct{ Tasks []map[string]any }
		_ = json.Unmarshal(body, &b)
		f.batches = append(f.batches, len(b.Tasks))
		var results []map[string]any
		for _, m := range b.Tasks {
			id := m["taskId"].(string)
			m["verb"] = "complete"
			f.outcomes[id] = m
			results = append(results, map[string]any{"taskId": id, "status": "COMPLETED"})
			f.done <- id
		}
		out, _ := json.Marshal(map[string]any{"results": results})
		w.Write(out)
	case path == "/v1/sdk/tasks/poll":
		var p struct{ Max int }
		_ = json.Unmarshal(body, &p)
		n := min(p.Max, len(f.queue))
		out, _ := json.Marshal(map[string]any{"tasks": f.queue[:n]})
		f.queue = f.queue[n:]
		w.Write(out)
	case strings.HasSuffix(path, "/heartbeat"):
		id := strings.Split(path, "/")[4]
		f.beats[id]++
		if f.lost[id] {
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"statusCode":409,"error":"Conflict","message":"the task's lease is no longer held"}`)
			return
		}
		out, _ := json.Marshal(map[string]any{"leaseExpiresAt": time.Now().Add(time.Minute), "cancelRequested": f.cancelled[id]})
		w.Write(out)
	default: // complete, fail
		parts := strings.Split(path, "/")
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		m["verb"] = parts[5]
		f.outcomes[parts[4]] = m
		io.WriteString(w, `{"status":"COMPLETED"}`)
		f.done <- parts[4]
	}
}

// awaitReports waits until n outcomes have been reported.
func (f *fakeTasks) awaitReports(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.done:
		case <-time.After(30 * time.Second):
			t.Fatal("not every task was reported")
		}
	}
}

func (f *fakeTasks) outcome(id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outcomes[id]
}

// The worker runs each module's tasks with its handler and reports each outcome: an output,
// a retryable failure, a NonRetryable one, and a cancelled run's task failed as cancelled.
func TestWorkerRunsTasksAndReportsOutcomes(t *testing.T) {
	f := newFakeTasks(
		client.Task{TaskID: "ok.1", ExecutionID: "ok", Module: "acme.m", Input: json.RawMessage(`{"n":1}`)},
		client.Task{TaskID: "retry.1", ExecutionID: "retry", Module: "acme.m", Input: json.RawMessage(`{"fail":"again"}`)},
		client.Task{TaskID: "final.1", ExecutionID: "final", Module: "acme.m", Input: json.RawMessage(`{"fail":"final"}`)},
		client.Task{TaskID: "cancel.1", ExecutionID: "cancel", Module: "acme.m", Input: json.RawMessage(`{"block":true}`)},
	)
	f.cancelled["cancel.1"] = true
	srv, m := server(t, f.handle)
	c, err := client.New(srv.URL, m.APIKey, m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(c, client.WorkerConfig{Concurrency: 4, PollWait: 50 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond,
		Handlers: map[string]client.Handler{"acme.m": func(ctx context.Context, t client.Task) (any, error) {
			var in struct {
				Fail  string
				Block bool
			}
			_ = json.Unmarshal(t.Input, &in)
			switch {
			case in.Block:
				<-ctx.Done() // until the run's cancellation reaches the handler
				return nil, ctx.Err()
			case in.Fail == "again":
				return nil, errors.New("try again")
			case in.Fail != "":
				return nil, client.NonRetryable(&client.TaskError{Code: "bad_input", Message: "no"})
			}
			return map[string]any{"echo": json.RawMessage(t.Input)}, nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	f.awaitReports(t, 4)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if o := f.outcome("ok.1"); o["verb"] != "complete" || !strings.Contains(mustJSON(t, o["output"]), `"n":1`) {
		t.Fatalf("ok: %v", o)
	}
	if o := f.outcome("retry.1"); o["verb"] != "fail" || o["retryable"] != true || o["error"].(map[string]any)["message"] != "try again" {
		t.Fatalf("retry: %v", o)
	}
	if o := f.outcome("final.1"); o["verb"] != "fail" || o["retryable"] != false || o["error"].(map[string]any)["code"] != "bad_input" {
		t.Fatalf("final: %v", o)
	}
	if o := f.outcome("cancel.1"); o["verb"] != "fail" || o["retryable"] != false || o["error"].(map[string]any)["code"] != "cancelled" {
		t.Fatalf("cancel: %v", o)
	}
}

// A task whose lease is lost (a heartbeat answered 409) has its handler's context cancelled
// and reports nothing; a drain lets the task in hand finish and report before Run returns.
func TestWorkerLostLeaseAndDrain(t *testing.T) {
	f := newFakeTasks(
		client.Task{TaskID: "lost.1", ExecutionID: "lost", Module: "acme.m", Input: json.RawMessage(`{"block":true}`)},
		client.Task{TaskID: "slow.1", ExecutionID: "slow", Module: "acme.m", Input: json.RawMessage(`{}`)},
	)
	f.lost["lost.1"] = true
	srv, m := server(t, f.handle)
	c, err := client.New(srv.URL, m.APIKey, m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	lostCancelled := make(chan struct{})
	slowStarted, release := make(chan struct{}), make(chan struct{})
	w, err := client.NewWorker(c, client.WorkerConfig{Concurrency: 2, PollWait: 50 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond,
		Handlers: map[string]client.Handler{"acme.m": func(ctx context.Context, t client.Task) (any, error) {
			if t.TaskID == "lost.1" {
				<-ctx.Done()
				close(lostCancelled)
				return nil, ctx.Err()
			}
			close(slowStarted)
			<-release
			return "done", nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-lostCancelled
	<-slowStarted
	stop() // SIGTERM: the worker stops polling and drains
	select {
	case <-done:
		t.Fatal("Run returned while a task was still running")
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if o := f.outcome("slow.1"); o["verb"] != "complete" || o["output"] != "done" {
		t.Fatalf("the drained task: %v", o)
	}
	if o := f.outcome("lost.1"); o != nil {
		t.Fatalf("a lost lease's task reported %v", o)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Tasks that finish while the worker's completion requests are out go together in the next
// request of the batch route, each reported once with its output; against a service without
// that route (404), the worker reports each task on its own route instead.
func TestWorkerReportsCompletionsTogether(t *testing.T) {
	for _, noBatch := range []bool{false, true} {
		const n = 20
		var tasks []client.Task
		for i := range n {
			id := fmt.Sprintf("t%d", i)
			tasks = append(tasks, client.Task{TaskID: id + ".1", ExecutionID: id, Module: "acme.m", Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		}
		f := newFakeTasks(tasks...)
		f.noBatch = noBatch
		f.gate, f.held = make(chan struct{}), make(chan struct{}, 2*n)
		srv, m := server(t, f.handle)
		c, err := client.New(srv.URL, m.APIKey, m.APISecret)
		if err != nil {
			t.Fatal(err)
		}
		var returned sync.WaitGroup
		returned.Add(n)
		w, err := client.NewWorker(c, client.WorkerConfig{Concurrency: n, Polls: 1, PollWait: 50 * time.Millisecond,
			Handlers: map[string]client.Handler{"acme.m": func(ctx context.Context, t client.Task) (any, error) {
				defer returned.Done()
				return json.RawMessage(t.Input), nil
			}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		// Every handler has returned and the first requests are held: the other completions
		// queue behind them, and go together once they are let through.
		returned.Wait()
		<-f.held
		close(f.gate)
		f.awaitReports(t, n)
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if o := f.outcome(fmt.Sprintf("t%d.1", i)); o["verb"] != "complete" || mustJSON(t, o["output"]) != fmt.Sprintf(`{"i":%d}`, i) {
				t.Fatalf("noBatch %v: task %d: %v", noBatch, i, o)
			}
		}
		f.mu.Lock()
		batched := 0
		for _, size := range f.batches {
			batched += size
		}
		f.mu.Unlock()
		switch {
		case noBatch && len(f.batches) == 0:
			t.Fatal("the worker never tried the batch route")
		case !noBatch && (len(f.batches) == 0 || batched < 2):
			t.Fatalf("completions were not batched: batches %v", f.batches)
		}
	}
}
