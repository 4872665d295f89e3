package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// Task is an attempt of a workspace module leased to this worker (POST /v1/sdk/tasks/poll).
type Task struct {
	TaskID         string          `json:"taskId"`
	ExecutionID    string          `json:"executionId"`
	Module         string          `json:"module"`
	Input          json.RawMessage `json:"input"`
	Config         json.RawMessage `json:"config"`
	Attempt        int             `json:"attempt"`
	Deadline       time.Time       `json:"deadline"`
	LeaseExpiresAt time.Time       `json:"leaseExpiresAt"`
	RunID          string          `json:"runId,omitempty"`
	StageID        string          `json:"stageId,omitempty"`
}

// Handler runs one task of a module and returns its output (any JSON value). An error fails
// the attempt: retried while attempts remain, unless wrapped by NonRetryable. Its ctx ends
// when the task's run is cancelled, the lease is lost, the deadline passes, or a drain runs
// out of time.
type Handler func(ctx context.Context, t Task) (any, error)

// TaskError is a failure with the code, message and details the execution records.
type TaskError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

func (e *TaskError) Error() string { return e.Code + ": " + e.Message }

type nonRetryable struct{ err error }

func (e nonRetryable) Error() string { return e.err.Error() }
func (e nonRetryable) Unwrap() error { return e.err }

// NonRetryable marks err as final: the execution fails without using its remaining attempts.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return nonRetryable{err}
}

// IsNonRetryable reports whether err was marked by NonRetryable.
func IsNonRetryable(err error) bool {
	var n nonRetryable
	return errors.As(err, &n)
}

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Handlers runs each module's tasks, by module name (required, at least one).
	Handlers map[string]Handler
	// Concurrency bounds the handlers running at once (a task whose handler has returned
	// frees its slot while its outcome is reported; as many reports may be pending). Default 4.
	Concurrency int
	// WorkerID names this worker in the executions' attempts and the console's workers page.
	// Default host name and process id.
	WorkerID string
	// Polls is how many polls wait at once (at most Concurrency), so that a task created
	// while one poll is being answered finds another waiting. Default 4 (at most Concurrency).
	Polls int
	// PollWait is how long one poll waits for a task (at most 30 s). Default 20 s.
	PollWait time.Duration
	// HeartbeatInterval is how often a running task's lease is renewed. Default 10 s (a lease
	// lasts 30 s unless the service says otherwise).
	HeartbeatInterval time.Duration
	// DrainTimeout bounds how long Run waits, once its ctx ends, for the handlers running;
	// then their contexts are cancelled and their tasks failed, to be retried elsewhere.
	// Default 30 s.
	DrainTimeout time.Duration
	// Logf receives the worker's warnings (failed polls, reports that did not land); default
	// none.
	Logf func(format string, args ...any)
}

func (c *WorkerConfig) setDefaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if c.Polls <= 0 {
		c.Polls = 4
	}
	c.Polls = min(c.Polls, c.Concurrency)
	if c.PollWait <= 0 || c.PollWait > 30*time.Second {
		c.PollWait = 20 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Validate reports a missing or malformed field, by name.
func (c WorkerConfig) Validate() error {
	switch {
	case len(c.Handlers) == 0:
		return errors.New("client: WorkerConfig.Handlers: at least one module's handler is required")
	case c.Concurrency < 0 || c.Concurrency > 100:
		return fmt.Errorf("client: WorkerConfig.Concurrency %d: must be from 1 to 100 (0 takes the default)", c.Concurrency)
	case len(c.WorkerID) > 200:
		return errors.New("client: WorkerConfig.WorkerID: must be at most 200 characters")
	}
	for name, h := range c.Handlers {
		if h == nil {
			return fmt.Errorf("client: WorkerConfig.Handlers[%q] is nil", name)
		}
	}
	return nil
}

// Worker leases the tasks of its modules and runs them with their handlers.
type Worker struct {
	c       *Client
	cfg     WorkerConfig
	modules []string
	reports *reporter
	// reporting bounds the tasks whose handlers have returned and whose outcomes are being
	// reported, as Concurrency bounds the handlers running.
	reporting chan struct{}
}

// NewWorker returns a worker calling the service through c; Run starts it.
func NewWorker(c *Client, cfg WorkerConfig) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	w := &Worker{c: c, cfg: cfg}
	w.reports = &reporter{w: w}
	w.reporting = make(chan struct{}, cfg.Concurrency)
	for name := range cfg.Handlers {
		w.modules = append(w.modules, name)
	}
	return w, nil
}

// Run polls for tasks and runs them, at most Concurrency at once, until ctx ends (wire it to
// SIGTERM with signal.NotifyContext). It then stops polling and drains: the tasks it holds
// finish and are reported, or, after DrainTimeout, are cancelled and failed so that another
// worker takes them over. It returns nil after a drain; a poll refused for good (a bad key,
// an unknown field) ends it with that error.
func (w *Worker) Run(ctx context.Context) error {
	slots := make(chan struct{}, w.cfg.Concurrency)
	drainCtx, stopHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHandlers()
	var tasks sync.WaitGroup
	var pollers sync.WaitGroup
	var errOnce sync.Once
	var runErr error
	pctx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	// A few polls wait at once, so that a task created while one poll is being answered finds
	// another waiting for it.
	for range w.cfg.Polls {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			if err := w.pollLoop(pctx, drainCtx, slots, &tasks); err != nil {
				errOnce.Do(func() { runErr = err })
				stopPolls()
			}
		}()
	}
	pollers.Wait()
	done := make(chan struct{})
	go func() { tasks.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.cfg.DrainTimeout):
		stopHandlers() // the handlers' contexts end; each reports its task failed
		<-done
	}
	return runErr
}

// pollLoop polls for as many tasks as slots are free and starts each, until ctx ends or a
// poll is refused for good.
func (w *Worker) pollLoop(ctx, drainCtx context.Context, slots chan struct{}, tasks *sync.WaitGroup) error {
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		// Each poll asks for its share of the slots, so the others have slots to wait with.
		free, share := 1, max(1, w.cfg.Concurrency/w.cfg.Polls)
	more:
		for free < share {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break more
			}
		}
		leased, err := w.poll(ctx, free)
		for range free - len(leased) {
			<-slots
		}
		for _, t := range leased {
			tasks.Add(1)
			go func() {
				defer tasks.Done()
				w.run(drainCtx, t, func() { <-slots })
			}()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var apiErr *Error
			if errors.As(err, &apiErr) && apiErr.StatusCode/100 == 4 && apiErr.StatusCode != http.StatusTooManyRequests {
				return err
			}
			w.cfg.Logf("switchyard worker: poll: %v", err)
			pause(ctx, time.Second)
		}
	}
	return nil
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (w *Worker) poll(ctx context.Context, max int) ([]Task, error) {
	var out struct {
		Tasks []Task `json:"tasks"`
	}
	body := map[string]any{"modules": w.modules, "max": max, "waitMs": w.cfg.PollWait.Milliseconds(), "workerId": w.cfg.WorkerID}
	err := w.c.do(ctx, http.MethodPost, "/v1/sdk/tasks/poll", body, &out)
	return out.Tasks, err
}

// errLeaseLost and errCancelRequested end a handler's context.
var (
	errLeaseLost       = errors.New("switchyard worker: the task's lease was lost")
	errCancelRequested = errors.New("switchyard worker: the task's run was cancelled")
)

// run runs t's handler under heartbeats and reports what it came to. It calls free once the
// handler has returned and a report slot is had: the task's run slot then takes the next task
// while the report is out (a report waits for its commit, which under load is most of a short
// task's time), and at most Concurrency reports are pending besides the tasks running.
func (w *Worker) run(ctx context.Context, t Task, free func()) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if !t.Deadline.IsZero() {
		var stop context.CancelFunc
		hctx, stop = context.WithDeadline(hctx, t.Deadline)
		defer stop()
	}
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		w.heartbeats(hctx, t, cancel)
	}()
	out, err := w.call(hctx, t)
	cause := context.Cause(hctx)
	cancel(nil)
	<-beats
	w.reporting <- struct{}{}
	defer func() { <-w.reporting }()
	free()
	report := context.WithoutCancel(ctx)
	switch {
	case errors.Is(cause, errLeaseLost):
		return // another attempt has it, or it ended: nothing to report
	case errors.Is(cause, errCancelRequested):
		w.fail(report, t, &TaskError{Code: "cancelled", Message: "the run was cancelled"}, false)
	case err == nil:
		w.complete(report, t, out)
	default:
		w.fail(report, t, taskError(err), !IsNonRetryable(err))
	}
}

// call runs the handler, turning a panic into a failure.
func (w *Worker) call(ctx context.Context, t Task) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &TaskError{Code: "panic", Message: fmt.Sprint(p)}
		}
	}()
	return w.cfg.Handlers[t.Module](ctx, t)
}

// heartbeats renews t's lease until ctx ends, cancelling it when the run is cancelled or the
// lease is lost.
func (w *Worker) heartbeats(ctx context.Context, t Task, cancel context.CancelCauseFunc) {
	tick := time.NewTicker(w.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var out struct {
			LeaseExpiresAt  time.Time `json:"leaseExpiresAt"`
			CancelRequested bool      `json:"cancelRequested"`
		}
		err := w.c.do(ctx, http.MethodPost, taskPath(t, "heartbeat"), struct{}{}, &out)
		switch {
		case IsStatus(err, http.StatusConflict), IsStatus(err, http.StatusNotFound):
			cancel(errLeaseLost)
			return
		case err != nil:
			if ctx.Err() == nil {
				w.cfg.Logf("switchyard worker: heartbeat of %s: %v", t.TaskID, err)
			}
		case out.CancelRequested:
			cancel(errCancelRequested)
			return
		}
	}
}

func taskPath(t Task, verb string) string {
	return "/v1/sdk/tasks/" + url.PathEscape(t.TaskID) + "/" + verb
}

// complete reports t's output, together with other tasks' finished meanwhile (reporter); an
// output the module's outputSchema refuses fails the task without retry (the same code would
// answer the same).
func (w *Worker) complete(ctx context.Context, t Task, out any) {
	err := w.reports.complete(ctx, t, out)
	var apiErr *Error
	switch {
	case err == nil, IsStatus(err, http.StatusConflict):
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest:
		w.fail(ctx, t, &TaskError{Code: "invalid_output", Message: apiErr.Message}, false)
	default:
		w.cfg.Logf("switchyard worker: complete %s: %v (its lease will hand it on)", t.TaskID, err)
	}
}

func (w *Worker) fail(ctx context.Context, t Task, e *TaskError, retryable bool) {
	err := w.c.do(ctx, http.MethodPost, taskPath(t, "fail"), map[string]any{"error": e, "retryable": retryable}, nil)
	if err != nil && !IsStatus(err, http.StatusConflict) {
		w.cfg.Logf("switchyard worker: fail %s: %v (its lease will hand it on)", t.TaskID, err)
	}
}

// taskError is the failure err reports: its own TaskError, a context's end, or its message.
func taskError(err error) *TaskError {
	var te *TaskError
	switch {
	case errors.As(err, &te):
		return te
	case errors.Is(err, context.DeadlineExceeded):
		return &TaskError{Code: "timeout", Message: "the task did not finish before its deadline"}
	case errors.Is(err, context.Canceled):
		return &TaskError{Code: "worker_stopped", Message: "the worker stopped before the task finished"}
	}
	return &TaskError{Code: "error", Message: err.Error()}
}
