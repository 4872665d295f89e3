package executor

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/module"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/modules/netguard"
	"github.com/switchyard/switchyard/reactors/webhooks"
	"github.com/switchyard/switchyard/seal"
)

// The HTTP transport of workspace modules (issue 28): each attempt is POSTed to the module's
// URL, signed as SPEC.md 6.1 signs webhooks, with x-event component.task.
const (
	// EventTask is the x-event of an attempt posted to a module's URL.
	EventTask = "component.task"
	// moduleUserAgent names the service on every request to a module.
	moduleUserAgent = "Switchyard-Modules/1 (+https://github.com/switchyard/switchyard)"
	// maxModuleResponse bounds what is read of a module's answer.
	maxModuleResponse = 4 << 20
)

// Failure codes of the HTTP transport, besides the registry's (timeout, blocked_address,
// network_error, http_status, invalid_output, response_too_large).
const (
	codeModuleUnavailable = "module_unavailable"
	// codeUnknownModule fails a workflow stage whose workspace module was deleted after the
	// workflow was saved: no attempt could find it.
	codeUnknownModule = "unknown_module"
)

// unknownModule is the final failure of a call naming a module that is neither a built-in
// nor carries a workspace module's transport.
func unknownModule(st execution.State) error {
	return final(modules.Fail(codeUnknownModule, "module %s does not exist (was it deleted after the workflow was saved?)", st.Module))
}

// Task is the body of an attempt posted to a module's URL.
type Task struct {
	TaskID      string          `json:"taskId"`
	ExecutionID string          `json:"executionId"`
	Module      string          `json:"module"`
	Input       json.RawMessage `json:"input"`
	Config      json.RawMessage `json:"config"`
	Attempt     int             `json:"attempt"`
	Deadline    time.Time       `json:"deadline"`
	RunID       string          `json:"runId,omitempty"`
	StageID     string          `json:"stageId,omitempty"`
}

// httpTransport posts the attempts of modules whose transport is "http".
type httpTransport struct {
	sealer *seal.Sealer
	// guarded goes through the SSRF guard; open does not (a module with allowPrivate).
	guarded, open *http.Client
	// bounds holds a semaphore per workspace, module and bound (Transport.Concurrency).
	mu     sync.Mutex
	bounds map[string]chan struct{}
}

func newHTTPTransport(sealer *seal.Sealer, roots *x509.CertPool) *httpTransport {
	client := func(allowPrivate bool) *http.Client {
		tr := netguard.NewTransport(allowPrivate)
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		// No client timeout: each request is bounded by its attempt's deadline (ctx). Redirects
		// are not followed: the signed task must go where the module's owner said.
		return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &httpTransport{sealer: sealer, guarded: client(false), open: client(true), bounds: map[string]chan struct{}{}}
}

// noRetry marks an attempt's failure as final: no further attempt could change it (the
// module's endpoint refused the task with a 4xx, its secret cannot be opened).
type noRetry struct{ f *modules.Failure }

func (n *noRetry) Error() string { return n.f.Error() }
func (n *noRetry) Unwrap() error { return n.f }

// retryable reports whether a failed attempt may be followed by another.
func retryable(err error) bool {
	var n *noRetry
	return !errors.As(err, &n)
}

func final(f *modules.Failure) error { return &noRetry{f: f} }

// runTransport runs the attempt of a workspace module over its transport; ctx carries the
// attempt's deadline (the module's timeoutMs, or a stage's shorter one).
func (e *Executor) runTransport(ctx context.Context, st execution.State, attempt int) (json.RawMessage, error) {
	if st.Transport.Type != execution.TransportHTTP {
		// Worker tasks are leased by workers' polls, not run here.
		return nil, modules.Infrastructure(fmt.Errorf("executor: transport %q is not run by the executor", st.Transport.Type))
	}
	if _, ok := ctx.Deadline(); !ok {
		// Every workspace module's submit records its timeoutMs; this bounds the request all
		// the same should one come without.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(module.DefaultTimeoutMs)*time.Millisecond)
		defer cancel()
	}
	schemas, err := e.moduleSchemas(ctx, st)
	if err != nil {
		return nil, err
	}
	if schemas != nil {
		// A stage's input is known only now: checked here as a built-in's is by its Run.
		if err := schemas.Validate(st.Config, st.Input); err != nil {
			return nil, schemaFailure(modules.CodeInvalidRequest, "", err)
		}
	}
	release, err := e.transport.acquire(ctx, st)
	if errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("executor: task abandoned: %w", err) // shutdown: the lease hands it on
	}
	if err != nil {
		return nil, modules.Fail(modules.CodeTimeout, "the attempt did not start within the module's timeoutMs (%d ms): the module's concurrency (%d) was in use", st.TimeoutMs, st.Transport.Concurrency)
	}
	defer release()
	out, err := e.transport.post(ctx, st, attempt)
	if err != nil {
		return nil, err
	}
	if err := domain.CheckStorableJSON("output", out); err != nil {
		return nil, outputUnstorable("output", err)
	}
	if schemas != nil {
		if err := schemas.ValidateOutput(out); err != nil {
			return nil, schemaFailure(modules.CodeInvalidOutput, "the module's output breaks its outputSchema: ", err)
		}
	}
	return out, nil
}

// moduleSchemas are the schemas of st's module as it is now; nil when it was deleted since
// the submit (its tasks in flight finish as they are).
func (e *Executor) moduleSchemas(ctx context.Context, st execution.State) (*modules.Schemas, error) {
	m, err := e.cmds.Modules.Get(ctx, st.WorkspaceID, st.Module)
	if errors.Is(err, module.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, modules.Infrastructure(err)
	}
	s, err := e.cmds.Modules.Schemas(m)
	if err != nil {
		return nil, modules.Infrastructure(err)
	}
	return s, nil
}

// schemaFailure is the final failure of a call a module's schema refused, naming the field.
func schemaFailure(code, prefix string, err error) error {
	field := "output"
	if code == modules.CodeInvalidRequest {
		field = "input"
	}
	var ve *modules.ValidationError
	if errors.As(err, &ve) {
		field = ve.Field
	}
	return final(&modules.Failure{Code: code, Message: prefix + err.Error(), Details: map[string]string{"field": field}})
}

// acquire waits for room under the module's concurrency bound in this process, until ctx
// ends; the wait counts towards the attempt's deadline, so the claim's lease still covers it.
func (t *httpTransport) acquire(ctx context.Context, st execution.State) (func(), error) {
	n := st.Transport.Concurrency
	if n <= 0 {
		return func() {}, nil
	}
	key := st.WorkspaceID + "\n" + st.Module + "\n" + strconv.Itoa(n)
	t.mu.Lock()
	sem, ok := t.bounds[key]
	if !ok {
		sem = make(chan struct{}, n)
		t.bounds[key] = sem
	}
	t.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// post sends the task and classifies the answer: a 2xx with {"output": any} completes; a 4xx
// fails for good, except 408 and 429; a 5xx, a timeout or a network error fails retryably.
func (t *httpTransport) post(ctx context.Context, st execution.State, attempt int) (json.RawMessage, error) {
	req, err := t.request(ctx, st, attempt)
	if err != nil {
		return nil, err
	}
	client := t.guarded
	if st.Transport.AllowPrivate {
		client = t.open
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, requestFailure(ctx, st, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModuleResponse+1))
	if err != nil {
		return nil, requestFailure(ctx, st, err)
	}
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return taskOutput(body)
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return nil, statusFailure(code)
	default: // 3xx (not followed) and the other 4xx: the endpoint refused the task
		return nil, final(statusFailure(code))
	}
}

// request builds the signed POST of the attempt. The opened secret lives only in this request.
func (t *httpTransport) request(ctx context.Context, st execution.State, attempt int) (*http.Request, error) {
	deadline, _ := ctx.Deadline() // runTransport gives every attempt one
	// The worker protocol's task id: one format for a module's attempts, whatever its transport.
	taskID := execution.TaskID(st.ID, attempt)
	body, err := json.Marshal(Task{TaskID: taskID, ExecutionID: st.ID, Module: st.Module, Input: orEmpty(st.Input),
		Config: orEmpty(st.Config), Attempt: attempt, Deadline: deadline.UTC(), RunID: st.RunID, StageID: st.StageID})
	if err != nil {
		return nil, fmt.Errorf("executor: encode task: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.Transport.URL, bytes.NewReader(body))
	if err != nil {
		return nil, final(modules.Fail(codeModuleUnavailable, "the module's URL cannot be requested"))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", moduleUserAgent)
	req.Header.Set(webhooks.HeaderDeliveryID, taskID)
	req.Header.Set(webhooks.HeaderEvent, EventTask)
	if st.Transport.SealedSecret != "" {
		if t.sealer == nil {
			return nil, modules.Infrastructure(errors.New("executor: no sealer to open module secrets with"))
		}
		secret, err := t.sealer.Open(st.Transport.SealedSecret, commands.ModuleSecretAAD(st.WorkspaceID, st.Module))
		if err != nil {
			return nil, final(modules.Fail(codeModuleUnavailable, "the module's secret could not be opened (was the secret key rotated away?)"))
		}
		ts := time.Now().UTC().Format(webhooks.TimestampFormat)
		req.Header.Set(webhooks.HeaderSignatureVersion, webhooks.SignatureVersion)
		req.Header.Set(webhooks.HeaderSignatureTimestamp, ts)
		req.Header.Set(webhooks.HeaderSignature, webhooks.Sign(secret, ts, body))
	}
	return req, nil
}

func orEmpty(doc json.RawMessage) json.RawMessage {
	if len(doc) == 0 {
		return json.RawMessage(`{}`)
	}
	return doc
}

// taskOutput reads a 2xx answer: {"output": any}.
func taskOutput(body []byte) (json.RawMessage, error) {
	if len(body) > maxModuleResponse {
		return nil, final(modules.Fail(modules.CodeResponseTooLarge, "the module answered more than %d bytes", maxModuleResponse))
	}
	var answer struct {
		Output *json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Output == nil {
		return nil, final(modules.Fail(modules.CodeInvalidOutput, `the module answered 2xx without a JSON body {"output": ...}`))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, *answer.Output); err != nil {
		return nil, final(modules.Fail(modules.CodeInvalidOutput, "the module's output is not valid JSON"))
	}
	return buf.Bytes(), nil
}

func statusFailure(code int) *modules.Failure {
	return &modules.Failure{Code: modules.CodeHTTPStatus, Message: fmt.Sprintf("the module's URL answered %d %s", code, http.StatusText(code)),
		Details: map[string]int{"statusCode": code}}
}

// requestFailure words a request that got no answer, without the addresses or internals the
// error may hold (those go nowhere: a module's owner sees its own endpoint's logs).
func requestFailure(ctx context.Context, st execution.State, err error) error {
	switch {
	case errors.Is(err, netguard.ErrBlockedAddress):
		return final(modules.Fail(modules.CodeBlockedAddress, "the module's URL leads to a private or reserved address; only a module with allowPrivate (set by an owner) may reach one"))
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("executor: task abandoned: %w", ctx.Err()) // shutdown: the lease hands it on
	case ctx.Err() != nil:
		return modules.Fail(modules.CodeTimeout, "the module did not answer within %d ms", st.TimeoutMs)
	}
	return modules.Fail(modules.CodeNetwork, "the module's URL could not be reached")
}
