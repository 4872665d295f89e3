package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
)

// Bounds of the completions one request carries (POST /v1/sdk/tasks/complete).
const (
	// maxBatchCompletions is the service's bound on the completions of one request.
	maxBatchCompletions = 100
	// maxBatchBytes keeps a batch well under the service's request body limit (1 MiB by
	// default); an output larger than this goes alone, on the task's own route.
	maxBatchBytes = 256 << 10
	// reportsInFlight is how many completion requests a worker has open at once. Completions
	// that finish while they are open wait and go together in the next one: a lone completion
	// goes at once, and a busy worker sends one signed request for many.
	reportsInFlight = 2
)

// reporter sends a worker's completions, several in one request when they finish together.
type reporter struct {
	w *Worker

	mu       sync.Mutex
	queue    []*pendingCompletion
	sending  int
	oneByOne atomic.Bool // the service has no batch route: each task on its own route
}

// pendingCompletion is a task's output waiting to be sent; done receives what came of it.
type pendingCompletion struct {
	t    Task
	out  json.RawMessage
	done chan error
}

// complete reports t's output and returns what the service answered for it: nil, or the
// *Error its own route would have given.
func (r *reporter) complete(ctx context.Context, t Task, out any) error {
	raw, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if len(raw) > maxBatchBytes || r.oneByOne.Load() {
		return r.completeOne(ctx, t, raw)
	}
	p := &pendingCompletion{t: t, out: raw, done: make(chan error, 1)}
	r.mu.Lock()
	r.queue = append(r.queue, p)
	start := r.sending < reportsInFlight
	if start {
		r.sending++
	}
	r.mu.Unlock()
	if start {
		go r.send(context.WithoutCancel(ctx))
	}
	return <-p.done
}

func (r *reporter) completeOne(ctx context.Context, t Task, raw json.RawMessage) error {
	return r.w.c.do(ctx, http.MethodPost, taskPath(t, "complete"), map[string]any{"output": raw}, nil)
}

// send posts the queued completions, a batch at a time, until the queue is empty.
func (r *reporter) send(ctx context.Context) {
	for {
		batch := r.take()
		if len(batch) == 0 {
			return
		}
		r.post(ctx, batch)
	}
}

// take removes the next batch from the queue; an empty one ends a sender.
func (r *reporter) take() []*pendingCompletion {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, size := 0, 0
	for n < len(r.queue) && n < maxBatchCompletions && size+len(r.queue[n].out) <= maxBatchBytes {
		size += len(r.queue[n].out)
		n++
	}
	if n == 0 {
		r.sending--
		return nil
	}
	batch := r.queue[:n:n]
	r.queue = r.queue[n:]
	return batch
}

// post sends one batch: alone on the task's route, or together on the batch route.
func (r *reporter) post(ctx context.Context, batch []*pendingCompletion) {
	if len(batch) == 1 {
		batch[0].done <- r.completeOne(ctx, batch[0].t, batch[0].out)
		return
	}
	type item struct {
		TaskID string          `json:"taskId"`
		Output json.RawMessage `json:"output"`
	}
	items := make([]item, len(batch))
	for i, p := range batch {
		items[i] = item{TaskID: p.t.TaskID, Output: p.out}
	}
	var out struct {
		Results []struct {
			TaskID string `json:"taskId"`
			Error  *Error `json:"error"`
		} `json:"results"`
	}
	err := r.w.c.do(ctx, http.MethodPost, "/v1/sdk/tasks/complete", map[string]any{"tasks": items}, &out)
	if IsStatus(err, http.StatusNotFound) || IsStatus(err, http.StatusMethodNotAllowed) {
		r.oneByOne.Store(true) // a service older than the batch route
		for _, p := range batch {
			p.done <- r.completeOne(ctx, p.t, p.out)
		}
		return
	}
	for i, p := range batch {
		switch {
		case err != nil:
			p.done <- err
		case i >= len(out.Results) || out.Results[i].TaskID != p.t.TaskID:
			p.done <- errors.New("switchyard worker: the service's answer to a batch of completions does not list this task")
		case out.Results[i].Error != nil:
			p.done <- out.Results[i].Error
		default:
			p.done <- nil
		}
	}
}
