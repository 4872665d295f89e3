package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/executor"
)

// guardStack is the SDK API on a real database, with the executor and scheduler running, for
// the tests of what SDKAuth guards: outages, stream caps and scoped keys.
type guardStack struct {
	core testCore
	srv  *httptest.Server
}

// newGuardStack mounts both SDK route sets behind an SDKAuth built from opts (its Lookup is
// the event store's), with the database as the one readiness check.
func newGuardStack(t *testing.T, opts httpapi.SDKAuthConfig) *guardStack {
	t.Helper()
	return mountGuardStack(t, newTestCore(t, true), opts)
}

// mountGuardStack is newGuardStack on core: two stacks on one core are two instances of the
// service sharing a database, each with its own SDKAuth.
func mountGuardStack(t *testing.T, core testCore, opts httpapi.SDKAuthConfig) *guardStack {
	t.Helper()
	opts.Lookup = httpapi.LookupFromStore(core.env.Cmds.Workspaces.APIKey)
	opts.Logger = core.log
	if opts.RatePerSecond == 0 {
		opts.RatePerSecond, opts.Burst = 10000, 10000
	}
	opts.ExecutionOwner = httpapi.ExecutionOwnerFrom(core.env.Cmds)
	auth := httpapi.NewSDKAuth(opts)
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: core.log,
		Checks: []httpapi.Check{{Name: "database", Check: core.env.Pool.Ping}}})
	(&httpapi.SDKComponents{Cmds: core.env.Cmds, Registry: core.reg, Hub: core.hub, Auth: auth,
		Heartbeat: time.Second}).Mount(server.V1)
	(&httpapi.SDKWorkflows{Cmds: core.env.Cmds, Queries: core.env.Queries, Hub: core.hub, Auth: auth,
		Heartbeat: time.Second}).Mount(server.V1)
	(&httpapi.SDKTasks{Tasks: noTasks{}, Auth: auth}).Mount(server.V1)
	(&httpapi.SDKEvents{Cmds: core.env.Cmds, Queries: core.env.Queries, Auth: auth}).Mount(server.V1)
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	return &guardStack{core: core, srv: srv}
}

// key mints an API key in ws, scoped to allowed when any are given.
func (s *guardStack) key(t *testing.T, ws string, allowed ...string) commands.APIKeyMinted {
	t.Helper()
	k, err := s.core.env.Cmds.Workspaces.CreateAPIKey(context.Background(), commands.CreateAPIKey{WorkspaceID: ws, Label: "t",
		AllowedWorkflowIDs: allowed})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// request builds a request signed with key; the nonce keeps repeated POSTs from being replays.
func (s *guardStack) request(t *testing.T, key commands.APIKeyMinted, method, target, body string) *http.Request {
	t.Helper()
	if method != http.MethodGet {
		target += "?nonce=" + strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	priv, err := apikeys.ParseSecret(key.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequest(method, s.srv.URL+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(httpapi.HeaderAPIKey, key.APIKey)
	req.Header.Set(httpapi.HeaderSDKTimestamp, ts)
	req.Header.Set(httpapi.HeaderSDKSignature, apikeys.Sign(priv, method, target, ts, []byte(body)))
	return req
}

// do sends a signed request and reads the whole answer.
func (s *guardStack) do(t *testing.T, key commands.APIKeyMinted, method, target, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(s.request(t, key, method, target, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// open starts a signed SSE request and leaves its body open until the test ends (or the
// caller closes it).
func (s *guardStack) open(t *testing.T, key commands.APIKeyMinted, target string) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(s.request(t, key, http.MethodGet, target, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// noTasks is a task board with no task on it: the worker protocol's routes answer as for a
// workspace without workers, so the guard's tests reach them (a body is checked before it).
type noTasks struct{}

func (noTasks) PollTasks(context.Context, executor.TaskPoll) ([]executor.LeasedTask, error) {
	return nil, nil
}

func (noTasks) WaitTasks(_ context.Context, _ executor.TaskPoll, answer func([]executor.LeasedTask, error)) {
	answer(nil, nil)
}

func (noTasks) HeartbeatTask(context.Context, executor.TaskCaller, string) (time.Time, bool, error) {
	return time.Time{}, false, domain.ErrNotFound
}

func (noTasks) CompleteTask(context.Context, executor.TaskCaller, string, json.RawMessage) (execution.State, error) {
	return execution.State{}, domain.ErrNotFound
}

func (noTasks) FailTask(context.Context, executor.TaskCaller, string, *modules.Failure, bool) (execution.State, error) {
	return execution.State{}, domain.ErrNotFound
}
