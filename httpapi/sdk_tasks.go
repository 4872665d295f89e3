package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/executor"
)

// Bounds of a worker's poll (issue 28).
const (
	maxPollModules = 50
	maxPollTasks   = 100
	maxPollWaitMs  = 30000
	maxWorkerID    = 200
	// maxCompletions bounds the outcomes of one POST /v1/sdk/tasks/complete, as a poll's
	// max bounds the tasks it leases.
	maxCompletions = 100
)

// TaskBoard is what the worker protocol's endpoints call: the executor's task board
// (reactors/executor, worker_tasks.go).
type TaskBoard interface {
	PollTasks(ctx context.Context, p executor.TaskPoll) ([]executor.LeasedTask, error)
	WaitTasks(ctx context.Context, p executor.TaskPoll, answer func([]executor.LeasedTask, error))
	HeartbeatTask(ctx context.Context, c executor.TaskCaller, taskID string) (time.Time, bool, error)
	CompleteTask(ctx context.Context, c executor.TaskCaller, taskID string, output json.RawMessage) (execution.State, error)
	FailTask(ctx context.Context, c executor.TaskCaller, taskID string, f *modules.Failure, retryable bool) (execution.State, error)
}

// SDKTasks serves the worker protocol: workers lease the attempts of workspace modules by
// long-poll, renew their leases and report outcomes (docs/workers.md).
type SDKTasks struct {
	Tasks TaskBoard
	Auth  *SDKAuth
}

// Mount adds the routes to the /v1 router.
func (s *SDKTasks) Mount(v1 *mux.Router) {
	v1.Handle("/sdk/tasks/poll", s.Auth.Route(1, http.HandlerFunc(s.poll))).Methods(http.MethodPost)
	v1.Handle("/sdk/tasks/complete", s.Auth.Route(1, http.HandlerFunc(s.completeMany), ClaimInCommit)).Methods(http.MethodPost)
	v1.Handle("/sdk/tasks/{taskId}/heartbeat", s.Auth.Route(1, http.HandlerFunc(s.heartbeat))).Methods(http.MethodPost)
	v1.Handle("/sdk/tasks/{taskId}/complete", s.Auth.Route(1, http.HandlerFunc(s.complete), ClaimInCommit)).Methods(http.MethodPost)
	v1.Handle("/sdk/tasks/{taskId}/fail", s.Auth.Route(1, http.HandlerFunc(s.fail))).Methods(http.MethodPost)
}

// taskFields reads a task request's body as an object of known fields, checked as the event
// log will need it (domain.CheckJSONBody names the field of a problem). An empty body is {}.
func taskFields(r *http.Request, known ...string) (map[string]json.RawMessage, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, domain.Invalid("body", "must be a JSON object")
	}
	if err := domain.CheckJSONBody("body", body); err != nil {
		return nil, err
	}
	if name, ok := unknownField(fields, func(name string) bool { return slices.Contains(known, name) }); ok {
		return nil, domain.Invalid(name, "is not a field of this request")
	}
	return fields, nil
}

func (s *SDKTasks) poll(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	fields, err := taskFields(r, "modules", "max", "waitMs", "workerId")
	if err != nil {
		writeTaskError(w, r, err)
		return
	}
	p, err := parsePoll(fields)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	p.WorkspaceID, p.AllowedWorkflowIDs = caller.WorkspaceID, caller.AllowedWorkflowIDs
	wait := p.Wait
	p.Wait = 0
	tasks, err := s.Tasks.PollTasks(r.Context(), p)
	if err != nil || len(tasks) > 0 || wait <= 0 {
		answerPoll(w, r, tasks, err)
		return
	}
	p.Wait = wait
	// An HTTP/1 poll that waits takes its connection over, as an idle SSE stream does: it is
	// then one small goroutine (a reader that notices the client leaving) and an entry on the
	// task board, instead of the server's connection goroutine with the request's stack and
	// buffers.
	if conn, _, ok := hijack(w); ok {
		go waitPoll(conn, w.Header().Clone(), r, s.Tasks, p)
		return
	}
	tasks, err = s.Tasks.PollTasks(r.Context(), p)
	answerPoll(w, r, tasks, err)
}

// answerPoll writes a poll's answer: the tasks leased (none is an empty list) or the error.
func answerPoll(w http.ResponseWriter, r *http.Request, tasks []executor.LeasedTask, err error) {
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	if tasks == nil {
		tasks = []executor.LeasedTask{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"tasks": tasks})
}

// waitPoll waits out p on a taken-over connection, reading it to notice the client leaving,
// which ends the wait; the board's answer is written on it, and it is closed.
func waitPoll(conn net.Conn, header http.Header, r *http.Request, board TaskBoard, p executor.TaskPoll) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	board.WaitTasks(ctx, p, func(tasks []executor.LeasedTask, err error) {
		defer conn.Close()
		if ctx.Err() != nil && len(tasks) == 0 {
			return // the client left
		}
		writePollAnswer(conn, header, r, tasks, err)
	})
	defer cancel()
	var buf [64]byte
	for {
		if _, err := conn.Read(buf[:]); err != nil {
			return // the client left, or the answer was written and the connection closed
		}
	}
}

// writePollAnswer writes a poll's answer whole on a taken-over connection.
func writePollAnswer(conn net.Conn, header http.Header, r *http.Request, tasks []executor.LeasedTask, err error) {
	rec := &bufferedResponse{header: header, status: http.StatusOK}
	answerPoll(rec, r, tasks, err)
	rec.header.Set("Connection", "close")
	rec.header.Set("Content-Length", strconv.Itoa(rec.body.Len()))
	var head strings.Builder
	fmt.Fprintf(&head, "HTTP/1.1 %d %s\r\n", rec.status, http.StatusText(rec.status))
	_ = rec.header.Write(&head)
	head.WriteString("\r\n")
	out := connWriter{conn: conn}
	if out.write(append([]byte(head.String()), rec.body.Bytes()...)) != nil && len(tasks) > 0 {
		LoggerFrom(r.Context()).WithField("tasks", len(tasks)).Warn("a poll's answer did not reach its worker; its leases run out")
	}
}

// bufferedResponse is an http.ResponseWriter that keeps the answer, for a taken-over
// connection to write whole.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }

// parsePoll reads a poll's fields, naming the field of a bad one.
func parsePoll(fields map[string]json.RawMessage) (executor.TaskPoll, error) {
	var p executor.TaskPoll
	raw, ok := fields["modules"]
	if !ok || isNull(raw) {
		return p, domain.Invalid("modules", "is required")
	}
	if err := json.Unmarshal(raw, &p.Modules); err != nil || len(p.Modules) == 0 || len(p.Modules) > maxPollModules {
		return p, domain.Invalid("modules", "must be a list of 1 to %d module names", maxPollModules)
	}
	for _, m := range p.Modules {
		if m == "" || len(m) > 100 {
			return p, domain.Invalid("modules", "must hold module names of 1 to 100 characters")
		}
	}
	var err error
	if p.Max, err = optionalInt(fields, "max", 1, maxPollTasks, 1); err != nil {
		return p, err
	}
	ms, err := optionalInt(fields, "waitMs", 0, maxPollWaitMs, 0)
	if err != nil {
		return p, err
	}
	p.Wait = time.Duration(ms) * time.Millisecond
	if p.WorkerID, err = requiredString(fields, "workerId"); err != nil {
		return p, err
	}
	if len(p.WorkerID) > maxWorkerID {
		return p, domain.Invalid("workerId", "must be at most %d characters", maxWorkerID)
	}
	return p, nil
}

func (s *SDKTasks) heartbeat(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	if _, err := taskFields(r, "progress"); err != nil {
		writeTaskError(w, r, err)
		return
	}
	until, cancelled, err := s.Tasks.HeartbeatTask(r.Context(), taskCaller(caller), mux.Vars(r)["taskId"])
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"leaseExpiresAt": until, "cancelRequested": cancelled})
}

func (s *SDKTasks) complete(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	fields, err := taskFields(r, "output")
	if err != nil {
		writeTaskError(w, r, err)
		return
	}
	tc := taskCaller(caller)
	tc.Claim = requestClaimFrom(r.Context()) // taken in the completion's commit
	st, err := s.Tasks.CompleteTask(r.Context(), tc, mux.Vars(r)["taskId"], fields["output"])
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"status": st.Status})
}

func (s *SDKTasks) fail(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	fields, err := taskFields(r, "error", "retryable")
	if err != nil {
		writeTaskError(w, r, err)
		return
	}
	f, retryable, err := parseTaskFailure(fields)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	st, err := s.Tasks.FailTask(r.Context(), taskCaller(caller), mux.Vars(r)["taskId"], f, retryable)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"status": st.Status})
}

// parseTaskFailure reads a fail's error {code, message, details} and retryable (default true).
func parseTaskFailure(fields map[string]json.RawMessage) (*modules.Failure, bool, error) {
	raw, ok := fields["error"]
	if !ok || isNull(raw) {
		return nil, false, domain.Invalid("error", "is required")
	}
	var e map[string]json.RawMessage
	if err := json.Unmarshal(raw, &e); err != nil || e == nil {
		return nil, false, domain.Invalid("error", "must be an object {code, message, details}")
	}
	for name := range e {
		if name != "code" && name != "message" && name != "details" {
			return nil, false, domain.Invalid("error."+name, "is not a field of an error")
		}
	}
	code, err := requiredString(e, "code")
	if err != nil {
		return nil, false, domain.Invalid("error.code", "is required: a non-empty string")
	}
	msg, err := optionalString(e, "message")
	if err != nil {
		return nil, false, domain.Invalid("error.message", "must be a string")
	}
	if len(code) > 100 || len(msg) > 4096 {
		return nil, false, domain.Invalid("error", "code must be at most 100 and message at most 4096 characters")
	}
	f := &modules.Failure{Code: code, Message: msg}
	if d, ok := e["details"]; ok && !isNull(d) {
		f.Details = d
	}
	retryable := true
	if r, ok := fields["retryable"]; ok && !isNull(r) {
		if err := json.Unmarshal(r, &retryable); err != nil {
			return nil, false, domain.Invalid("retryable", "must be a boolean")
		}
	}
	return f, retryable, nil
}

func taskCaller(c Caller) executor.TaskCaller {
	return executor.TaskCaller{WorkspaceID: c.WorkspaceID, AllowedWorkflowIDs: c.AllowedWorkflowIDs}
}

// writeTaskError answers a body that could not be read or parsed.
func writeTaskError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, domain.ErrInvalid) {
		WriteDomainError(w, r, err)
		return
	}
	writeBodyError(w, err)
}
