package httpapi_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/webhooks"
	"github.com/switchyard/switchyard/testenv"
)

// moduleStack is the SDK API and the workspace endpoints in process, with the executor and
// scheduler running and a cache window on: the stack of the workspace module tests.
type moduleStack struct {
	*guardStack
	bearer fakeBearer
}

func newModuleStack(t *testing.T) *moduleStack {
	t.Helper()
	core := newTestCore(t, true)
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(core.env.Cmds.Workspaces.APIKey),
		RatePerSecond: 10000, Burst: 10000, Logger: core.log, ExecutionOwner: httpapi.ExecutionOwnerFrom(core.env.Cmds)})
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: core.log})
	(&httpapi.SDKComponents{Cmds: core.env.Cmds, Registry: core.reg, Queries: core.env.Queries, Hub: core.hub, Auth: auth,
		CacheWindow: time.Minute, Heartbeat: time.Second}).Mount(server.V1)
	(&httpapi.SDKWorkflows{Cmds: core.env.Cmds, Queries: core.env.Queries, Hub: core.hub, Auth: auth, Heartbeat: time.Second}).Mount(server.V1)
	bearer := fakeBearer{}
	(&httpapi.Workspaces{Cmds: core.env.Cmds, Queries: core.env.Queries, Auth: bearer}).Mount(server.V1)
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	return &moduleStack{guardStack: &guardStack{core: core, srv: srv}, bearer: bearer}
}

// ownerToken hands out a workspace:admin token of ws's owner, by the name it returns.
func (s *moduleStack) ownerToken(t *testing.T, ws string) string {
	t.Helper()
	st, err := s.core.env.Cmds.Workspaces.Workspace(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for id, role := range st.Members {
		if role == "owner" {
			s.bearer["owner-"+ws] = identity.Principal{UserID: id, ClientID: "app", WorkspaceID: ws, Scopes: []string{identity.ScopeWorkspaceAdmin}}
		}
	}
	return "owner-" + ws
}

// adminSession makes a new user an admin (not an owner) of ws and returns their session token.
func (s *moduleStack) adminSession(t *testing.T, ws string) string {
	t.Helper()
	ctx := context.Background()
	email := "admin-" + uuid.NewString()[:8] + "@example.com"
	id, err := s.core.env.Cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: "password-123"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.core.env.Cmds.Workspaces.AddMember(ctx, ws, email, "admin"); err != nil {
		t.Fatal(err)
	}
	s.bearer["admin-"+ws] = identity.Principal{Session: true, UserID: id}
	return "admin-" + ws
}

func (s *moduleStack) api(t *testing.T, method, path, bearer, body string) (int, map[string]any, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, string(raw)
}

// submit posts a signed submit and decodes the answer.
func (s *moduleStack) submit(t *testing.T, key commands.APIKeyMinted, body string) (int, map[string]any) {
	t.Helper()
	resp, raw := s.do(t, key, http.MethodPost, "/v1/sdk/components", body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// execution waits until the execution is COMPLETED or FAILED and returns its record.
func (s *moduleStack) execution(t *testing.T, key commands.APIKeyMinted, id string) map[string]any {
	t.Helper()
	var rec map[string]any
	testenv.Eventually(t, 30*time.Second, "execution "+id+" ends", func() bool {
		resp, raw := s.do(t, key, http.MethodGet, "/v1/sdk/components/executions/"+id, "")
		rec = nil
		_ = json.Unmarshal(raw, &rec)
		return resp.StatusCode == http.StatusOK && (rec["status"] == "COMPLETED" || rec["status"] == "FAILED")
	})
	return rec
}

// receiver is a module's HTTP endpoint: it checks each task's signature and answers by the
// input's mode, counting the tasks it got.
type receiver struct {
	secret string
	mu     sync.Mutex
	tasks  []executor.Task
	bad    int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ts := r.Header.Get(webhooks.HeaderSignatureTimestamp)
	want := webhooks.Sign([]byte(rc.secret), ts, body)
	var task executor.Task
	err := json.Unmarshal(body, &task)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !hmac.Equal([]byte(r.Header.Get(webhooks.HeaderSignature)), []byte(want)) || r.Header.Get(webhooks.HeaderEvent) != executor.EventTask ||
		r.Header.Get(webhooks.HeaderSignatureVersion) != "v1" || err != nil || task.Deadline.IsZero() ||
		r.Header.Get(webhooks.HeaderDeliveryID) != task.TaskID || task.TaskID != execution.TaskID(task.ExecutionID, task.Attempt) {
		rc.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rc.tasks = append(rc.tasks, task)
	var in struct {
		N    int    `json:"n"`
		Mode string `json:"mode"`
	}
	_ = json.Unmarshal(task.Input, &in)
	switch in.Mode {
	case "reject":
		w.WriteHeader(http.StatusUnprocessableEntity)
	case "flaky":
		w.WriteHeader(http.StatusServiceUnavailable)
	case "busy":
		w.WriteHeader(http.StatusTooManyRequests)
	default:
		fmt.Fprintf(w, `{"output": {"doubled": %d, "attempt": %d}}`, 2*in.N, task.Attempt)
	}
}

// hits counts the tasks of one execution.
func (rc *receiver) hits(executionID string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, task := range rc.tasks {
		if task.ExecutionID == executionID {
			n++
		}
	}
	return n
}

func wantStatus(t *testing.T, what string, got, want int, body string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %d %s, want %d", what, got, body, want)
	}
}

func wantField(t *testing.T, what string, status int, body, field string) {
	t.Helper()
	if status != http.StatusBadRequest || !strings.Contains(body, field) {
		t.Fatalf("%s: %d %s, want a 400 naming %s", what, status, body, field)
	}
}

func TestWorkspaceModuleEndpoints(t *testing.T) {
	s := newModuleStack(t)
	env := s.core.env
	ws, other := env.Workspace(t, 100), env.Workspace(t, 100)
	owner, admin, stranger := s.ownerToken(t, ws), s.adminSession(t, ws), s.ownerToken(t, other)
	s.bearer["reader"] = identity.Principal{UserID: s.bearer[owner].UserID, ClientID: "app", WorkspaceID: ws,
		Scopes: []string{identity.ScopeWorkspaceRead}}
	base := "/v1/workspaces/" + ws + "/modules"
	resize := `{"name": "acme.resize", "description": "Resize", "price": 2.5,
		"inputSchema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}},
		"transport": {"type": "http", "url": "https://example.com/run", "secret": "s3cret-value"}}`

	st, m, raw := s.api(t, http.MethodPost, base, owner, resize)
	wantStatus(t, "register", st, http.StatusCreated, raw)
	tr, _ := m["transport"].(map[string]any)
	if m["name"] != "acme.resize" || m["price"] != 2.5 || m["timeoutMs"] != 60000.0 || m["cacheable"] != false || m["version"] != 1.0 ||
		tr["signed"] != true || tr["type"] != "http" || strings.Contains(raw, "s3cret") {
		t.Fatalf("registered: %s", raw)
	}
	st, _, raw = s.api(t, http.MethodPost, base, owner, resize)
	wantStatus(t, "the same name again", st, http.StatusConflict, raw)

	t.Run("refusals name the field", func(t *testing.T) {
		for _, c := range []struct{ body, field string }{
			{`{"name": "core.mine", "transport": {"type": "worker"}}`, "name"},
			{`{"name": "nodot", "transport": {"type": "worker"}}`, "name"},
			{`{"name": "acme.x", "timeoutMs": 0, "transport": {"type": "worker"}}`, "timeoutMs"},
			{`{"name": "acme.x", "timeoutMs": 3600001, "transport": {"type": "worker"}}`, "timeoutMs"},
			{`{"name": "acme.x", "price": 0.0001, "transport": {"type": "worker"}}`, "price"},
			{`{"name": "acme.x", "price": 1000001, "transport": {"type": "worker"}}`, "price"},
			{`{"name": "acme.x"}`, "transport"},
			{`{"name": "acme.x", "transport": {"type": "ftp"}}`, "transport.type"},
			{`{"name": "acme.x", "inputSchema": {"type": 12}, "transport": {"type": "worker"}}`, "inputSchema"},
			{`{"name": "acme.x", "transport": {"type": "http", "url": "http://example.com/", "secret": "s"}}`, "transport.url"},
			{`{"name": "acme.x", "transport": {"type": "http", "url": "https://example.com/"}}`, "transport.secret"},
			{`{"name": "acme.x", "typo": 1, "transport": {"type": "worker"}}`, "typo"},
		} {
			st, _, raw := s.api(t, http.MethodPost, base, owner, c.body)
			wantField(t, c.body, st, raw, c.field)
		}
	})

	t.Run("allowPrivate is the owners'", func(t *testing.T) {
		local := `{"name": "acme.local", "transport": {"type": "http", "url": "http://127.0.0.1:9/run", "secret": "s", "allowPrivate": true}}`
		st, _, raw := s.api(t, http.MethodPost, base, admin, local)
		wantStatus(t, "an admin sets allowPrivate", st, http.StatusForbidden, raw)
		st, _, raw = s.api(t, http.MethodPost, base, owner, local)
		wantStatus(t, "the owner sets allowPrivate", st, http.StatusCreated, raw)
		// The admin may edit the module, keeping its allowPrivate and URL (and its secret).
		st, m, raw := s.api(t, http.MethodPut, base+"/acme.local", admin,
			`{"description": "kept", "transport": {"type": "http", "url": "http://127.0.0.1:9/run", "allowPrivate": true}}`)
		wantStatus(t, "an admin edits a private module", st, http.StatusOK, raw)
		if tr := m["transport"].(map[string]any); tr["signed"] != true || tr["allowPrivate"] != true || m["version"] != 2.0 {
			t.Fatalf("after the admin's edit: %s", raw)
		}
		st, _, raw = s.api(t, http.MethodPut, base+"/acme.local", admin,
			`{"transport": {"type": "http", "url": "http://10.1.2.3/run", "allowPrivate": true}}`)
		wantStatus(t, "an admin points a private module elsewhere", st, http.StatusForbidden, raw)
	})

	t.Run("access", func(t *testing.T) {
		st, _, raw := s.api(t, http.MethodGet, base, "reader", "")
		wantStatus(t, "workspace:read lists", st, http.StatusForbidden, raw)
		st, _, raw = s.api(t, http.MethodGet, base+"/acme.resize", stranger, "")
		wantStatus(t, "another workspace's token", st, http.StatusForbidden, raw)
		st, _, raw = s.api(t, http.MethodGet, "/v1/workspaces/"+other+"/modules/acme.resize", stranger, "")
		wantStatus(t, "the name in another workspace", st, http.StatusNotFound, raw)
	})

	st, m, raw = s.api(t, http.MethodGet, base+"/acme.resize", owner, "")
	if st != http.StatusOK || m["description"] != "Resize" || strings.Contains(raw, "s3cret") {
		t.Fatalf("get: %d %s", st, raw)
	}
	st, _, raw = s.api(t, http.MethodPut, base+"/acme.resize", owner, `{"name": "acme.other", "transport": {"type": "worker"}}`)
	wantField(t, "renaming", st, raw, "name")
	st, _, raw = s.api(t, http.MethodGet, base+"/acme.nothing", owner, "")
	wantStatus(t, "an unknown module", st, http.StatusNotFound, raw)

	env.CaughtUp(t, "modules")
	st, m, raw = s.api(t, http.MethodGet, base+"?limit=1", owner, "")
	data, _ := m["data"].([]any)
	if st != http.StatusOK || m["total"] != 2.0 || m["totalPages"] != 2.0 || len(data) != 1 || data[0].(map[string]any)["name"] != "acme.local" ||
		strings.Contains(raw, "s3cret") || strings.Contains(raw, "sealed") {
		t.Fatalf("list: %d %s", st, raw)
	}

	key := s.key(t, ws)
	resp, body := s.do(t, key, http.MethodGet, "/v1/sdk/modules?limit=100", "")
	var listing struct {
		Data []struct {
			Name      string
			Cost      float64
			Transport string
		}
		Total int
	}
	if err := json.Unmarshal(body, &listing); err != nil || resp.StatusCode != http.StatusOK || listing.Total != len(s.core.reg.List())+2 {
		t.Fatalf("sdk modules: %d %s", resp.StatusCode, body)
	}
	if last := listing.Data[len(listing.Data)-1]; last.Name != "acme.resize" || last.Cost != 2.5 || last.Transport != "http" {
		t.Fatalf("sdk modules end with %+v", last)
	}

	// The secret is sealed in the log: never there in the clear.
	events, err := env.Store.ReadStream(context.Background(), commands.ModuleStream(ws, "acme.resize"), 0, 10)
	if err != nil || len(events) != 1 || bytes.Contains(events[0].Data, []byte("s3cret")) {
		t.Fatalf("module stream: %v %v", events, err)
	}

	st, _, raw = s.api(t, http.MethodDelete, base+"/acme.resize", owner, "")
	wantStatus(t, "delete", st, http.StatusNoContent, raw)
	st, _, raw = s.api(t, http.MethodDelete, base+"/acme.resize", owner, "")
	wantStatus(t, "delete again", st, http.StatusNotFound, raw)
	st, _, raw = s.api(t, http.MethodGet, base+"/acme.resize", owner, "")
	wantStatus(t, "get deleted", st, http.StatusNotFound, raw)
	code, out := s.submit(t, key, `{"module": "acme.resize", "input": {"n": 1}, "config": {}}`)
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["message"]), "unknown module") {
		t.Fatalf("submit to a deleted module: %d %v", code, out)
	}
}

// TestHTTPTransportModule submits to a module served by an HTTP endpoint that verifies each
// task's signature: completions are charged the module's price once each, refusals and
// failures are free, a 4xx is not retried but a 5xx is, identical calls are not served from
// the cache window, and a private address is refused unless an owner allowed it.
func TestHTTPTransportModule(t *testing.T) {
	s := newModuleStack(t)
	env := s.core.env
	ws := env.Workspace(t, 100)
	owner := s.ownerToken(t, ws)
	rc := &receiver{secret: "task-secret"}
	endpoint := httptest.NewServer(rc)
	t.Cleanup(endpoint.Close)
	st, _, raw := s.api(t, http.MethodPost, "/v1/workspaces/"+ws+"/modules", owner, fmt.Sprintf(`{"name": "acme.double", "price": 2.5,
		"inputSchema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}, "mode": {"type": "string"}}},
		"outputSchema": {"type": "object", "required": ["doubled"]},
		"transport": {"type": "http", "url": %q, "secret": "task-secret", "allowPrivate": true}}`, endpoint.URL+"/run"))
	wantStatus(t, "register", st, http.StatusCreated, raw)
	key := s.key(t, ws)

	code, out := s.submit(t, key, `{"module": "acme.double", "input": {"n": 21}, "config": {}, "waitForMs": 10000}`)
	if code != http.StatusOK {
		t.Fatalf("submit: %d %v", code, out)
	}
	rec := s.execution(t, key, out["id"].(string))
	if rec["status"] != "COMPLETED" || fmt.Sprint(rec["output"]) != "map[attempt:1 doubled:42]" || rec["totalUsage"] != 2.5 {
		t.Fatalf("completed: %v", rec)
	}
	// Not cacheable: the identical call runs (and is billed) again.
	_, again := s.submit(t, key, `{"module": "acme.double", "input": {"n": 21}, "config": {}, "waitForMs": 10000}`)
	if rec := s.execution(t, key, again["id"].(string)); rec["status"] != "COMPLETED" || rec["totalUsage"] != 2.5 || rc.hits(again["id"].(string)) != 1 {
		t.Fatalf("the repeat: %v (%d tasks)", rec, rc.hits(again["id"].(string)))
	}

	code, out = s.submit(t, key, `{"module": "acme.double", "input": {"n": "x"}, "config": {}}`)
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["message"]), "input.n") {
		t.Fatalf("schema violation: %d %v", code, out)
	}

	for _, c := range []struct {
		mode     string
		attempts int
		tasks    int
	}{{"reject", 3, 1}, {"flaky", 2, 2}, {"busy", 2, 2}} {
		_, out := s.submit(t, key, fmt.Sprintf(`{"module": "acme.double", "input": {"n": 1, "mode": %q}, "config": {}, "attempts": %d}`, c.mode, c.attempts))
		id := out["id"].(string)
		rec := s.execution(t, key, id)
		errBody, _ := rec["error"].(map[string]any)
		if rec["status"] != "FAILED" || rec["totalUsage"] != 0.0 || errBody["code"] != "http_status" || rc.hits(id) != c.tasks {
			t.Fatalf("%s: %v after %d tasks, want FAILED after %d", c.mode, rec, rc.hits(id), c.tasks)
		}
	}
	if rc.bad != 0 {
		t.Fatalf("%d tasks came unsigned or malformed", rc.bad)
	}
	bal, err := env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || bal.Total() != billing.FromWhole(95) {
		t.Fatalf("balance %v (%v), want 100 - 2 x 2.5", bal.Total(), err)
	}

	t.Run("concurrency bounds the tasks in flight", func(t *testing.T) {
		gate := &gatedReceiver{release: make(chan struct{})}
		slow := httptest.NewServer(gate)
		t.Cleanup(slow.Close)
		st, _, raw := s.api(t, http.MethodPost, "/v1/workspaces/"+ws+"/modules", owner, fmt.Sprintf(`{"name": "acme.slow", "price": 0,
			"concurrency": 1, "transport": {"type": "http", "url": %q, "secret": "s", "allowPrivate": true}}`, slow.URL))
		wantStatus(t, "register", st, http.StatusCreated, raw)
		var ids []string
		for i := range 3 {
			_, out := s.submit(t, key, fmt.Sprintf(`{"module": "acme.slow", "input": {"n": %d}, "config": {}}`, i))
			ids = append(ids, out["id"].(string))
		}
		// Each task is let go only once it arrived; the next may arrive only then.
		for i := 1; i <= 3; i++ {
			testenv.Eventually(t, 30*time.Second, fmt.Sprintf("task %d to arrive", i), func() bool { return gate.arrived() >= i })
			gate.release <- struct{}{}
		}
		for _, id := range ids {
			if rec := s.execution(t, key, id); rec["status"] != "COMPLETED" {
				t.Fatalf("bounded call: %v", rec)
			}
		}
		if gate.most() != 1 {
			t.Fatalf("%d tasks were in flight at once, want at most 1", gate.most())
		}
	})

	t.Run("an output its schema refuses", func(t *testing.T) {
		st, _, raw := s.api(t, http.MethodPost, "/v1/workspaces/"+ws+"/modules", owner, fmt.Sprintf(`{"name": "acme.strict",
			"outputSchema": {"type": "object", "required": ["missing"]},
			"transport": {"type": "http", "url": %q, "secret": "task-secret", "allowPrivate": true}}`, endpoint.URL))
		wantStatus(t, "register", st, http.StatusCreated, raw)
		_, out := s.submit(t, key, `{"module": "acme.strict", "input": {"n": 1}, "config": {}, "attempts": 3}`)
		id := out["id"].(string)
		rec := s.execution(t, key, id)
		errBody, _ := rec["error"].(map[string]any)
		if rec["status"] != "FAILED" || errBody["code"] != "invalid_output" || !strings.Contains(fmt.Sprint(errBody["message"]), "output.missing") ||
			rec["totalUsage"] != 0.0 || rc.hits(id) != 1 {
			t.Fatalf("an output breaking the schema: %v (%d tasks)", rec, rc.hits(id))
		}
	})

	t.Run("a task in flight finishes after its module is deleted", func(t *testing.T) {
		gate := &gatedReceiver{release: make(chan struct{})}
		slow := httptest.NewServer(gate)
		t.Cleanup(slow.Close)
		st, _, raw := s.api(t, http.MethodPost, "/v1/workspaces/"+ws+"/modules", owner, fmt.Sprintf(`{"name": "acme.going", "price": 0.5,
			"transport": {"type": "http", "url": %q, "secret": "s", "allowPrivate": true}}`, slow.URL))
		wantStatus(t, "register", st, http.StatusCreated, raw)
		_, out := s.submit(t, key, `{"module": "acme.going", "input": {}, "config": {}}`)
		testenv.Eventually(t, 30*time.Second, "the task to arrive", func() bool { return gate.arrived() == 1 })
		st, _, raw = s.api(t, http.MethodDelete, "/v1/workspaces/"+ws+"/modules/acme.going", owner, "")
		wantStatus(t, "delete", st, http.StatusNoContent, raw)
		gate.release <- struct{}{}
		// Completed and charged as submitted.
		if rec := s.execution(t, key, out["id"].(string)); rec["status"] != "COMPLETED" || rec["totalUsage"] != 0.5 {
			t.Fatalf("the task in flight: %v", rec)
		}
		code, refused := s.submit(t, key, `{"module": "acme.going", "input": {}, "config": {}}`)
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(refused["message"]), "unknown module") {
			t.Fatalf("a submit after the delete: %d %v", code, refused)
		}
	})

	t.Run("a private address without allowPrivate", func(t *testing.T) {
		private := httptest.NewTLSServer(rc)
		t.Cleanup(private.Close)
		st, _, raw := s.api(t, http.MethodPost, "/v1/workspaces/"+ws+"/modules", owner, fmt.Sprintf(`{"name": "acme.private",
			"transport": {"type": "http", "url": %q, "secret": "task-secret"}}`, private.URL))
		wantStatus(t, "register", st, http.StatusCreated, raw)
		_, out := s.submit(t, key, `{"module": "acme.private", "input": {"n": 1}, "config": {}, "attempts": 3}`)
		id := out["id"].(string)
		rec := s.execution(t, key, id)
		errBody, _ := rec["error"].(map[string]any)
		if rec["status"] != "FAILED" || errBody["code"] != "blocked_address" || rc.hits(id) != 0 {
			t.Fatalf("private address: %v", rec)
		}
	})
}

// TestWorkflowForEachOverWorkspaceModule saves a workflow whose FOR_EACH body is a workspace
// module (its config checked against the module's schema when saved) and runs it: every
// iteration reaches the module's endpoint once, and each is billed at the module's price.
func TestWorkflowForEachOverWorkspaceModule(t *testing.T) {
	s := newModuleStack(t)
	env := s.core.env
	ws := env.Workspace(t, 100)
	owner := s.ownerToken(t, ws)
	rc := &receiver{secret: "loop-secret"}
	endpoint := httptest.NewServer(rc)
	t.Cleanup(endpoint.Close)
	st, _, raw := s.api(t, http.MethodPost, "/v1/workspaces/"+ws+"/modules", owner, fmt.Sprintf(`{"name": "acme.double", "price": 1.5,
		"configSchema": {"type": "object", "properties": {"factor": {"type": "integer"}}, "additionalProperties": false},
		"inputSchema": {"type": "object", "required": ["n"]},
		"transport": {"type": "http", "url": %q, "secret": "loop-secret", "allowPrivate": true}}`, endpoint.URL))
	wantStatus(t, "register", st, http.StatusCreated, raw)
	def := `{"name": "loop %s", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 3}},
		{"id": "work", "module": %q, "config": %s}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item"}}]}`
	base := "/v1/workspaces/" + ws + "/workflows"
	st, _, raw = s.api(t, http.MethodPost, base, owner, fmt.Sprintf(def, "bad", "acme.double", `{"factor": "two"}`))
	wantField(t, "a config the module's schema refuses", st, raw, "config.factor")
	st, _, raw = s.api(t, http.MethodPost, base, owner, fmt.Sprintf(def, "unknown", "acme.nothing", `{}`))
	wantField(t, "an unknown module", st, raw, "unknown module")
	st, wf, raw := s.api(t, http.MethodPost, base, owner, fmt.Sprintf(def, "good", "acme.double", `{"factor": 2}`))
	wantStatus(t, "save", st, http.StatusCreated, raw)

	key := s.key(t, ws)
	resp, body := s.do(t, key, http.MethodPost, "/v1/sdk/workflows/"+wf["id"].(string), `{"items": [1, 2, 3, 4, 5, 6, 7]}`)
	var runs []struct{ RunID string }
	if err := json.Unmarshal(body, &runs); err != nil || resp.StatusCode != http.StatusOK || len(runs) != 1 {
		t.Fatalf("trigger: %d %s", resp.StatusCode, body)
	}
	var run map[string]any
	testenv.Eventually(t, 60*time.Second, "the run ends", func() bool {
		_, body := s.do(t, key, http.MethodGet, "/v1/sdk/workflows/executions/"+runs[0].RunID, "")
		run = nil
		_ = json.Unmarshal(body, &run)
		return run["status"] == "COMPLETED" || run["status"] == "FAILED"
	})
	if run["status"] != "COMPLETED" || run["totalUsage"] != 10.5 {
		t.Fatalf("run: %v", run)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string]int{}
	for _, task := range rc.tasks {
		if task.RunID != runs[0].RunID || task.StageID == "" || string(task.Config) != `{"factor":2}` {
			t.Fatalf("task %+v", task)
		}
		seen[string(task.Input)]++
	}
	if len(seen) != 7 || rc.bad != 0 {
		t.Fatalf("tasks by input %v (%d bad), want each of 7 items once", seen, rc.bad)
	}
	for in, n := range seen {
		if n != 1 {
			t.Fatalf("input %s reached the module %d times", in, n)
		}
	}
	rc.mu.Unlock()

	// Deleted after the workflow was saved: the run fails at the module's first stage, at
	// once (no retries of a module that is gone), and nothing reaches the endpoint.
	st, _, raw = s.api(t, http.MethodDelete, "/v1/workspaces/"+ws+"/modules/acme.double", owner, "")
	wantStatus(t, "delete", st, http.StatusNoContent, raw)
	_, body = s.do(t, key, http.MethodPost, "/v1/sdk/workflows/"+wf["id"].(string), `{"items": [1]}`)
	if err := json.Unmarshal(body, &runs); err != nil || len(runs) != 1 {
		t.Fatalf("trigger: %s", body)
	}
	testenv.Eventually(t, 60*time.Second, "the run ends", func() bool {
		_, body := s.do(t, key, http.MethodGet, "/v1/sdk/workflows/executions/"+runs[0].RunID, "")
		run = nil
		_ = json.Unmarshal(body, &run)
		return run["status"] == "COMPLETED" || run["status"] == "FAILED"
	})
	stages, _ := run["runStages"].([]any)
	failed := ""
	for _, st := range stages {
		if e, _ := st.(map[string]any)["error"].(map[string]any); e != nil {
			failed = fmt.Sprint(e["code"])
		}
	}
	rc.mu.Lock()
	if run["status"] != "FAILED" || failed != "unknown_module" || len(rc.tasks) != 7 {
		t.Fatalf("a run of a deleted module: %v (%d tasks)", run, len(rc.tasks))
	}
}

// gatedReceiver answers each task once the test releases it, and counts how many it held at
// once.
type gatedReceiver struct {
	release        chan struct{}
	mu             sync.Mutex
	n, now, record int
}

func (g *gatedReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.n, g.now = g.n+1, g.now+1
	g.record = max(g.record, g.now)
	g.mu.Unlock()
	select {
	case <-g.release:
	case <-r.Context().Done():
	}
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	fmt.Fprint(w, `{"output": {}}`)
}

func (g *gatedReceiver) arrived() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

func (g *gatedReceiver) most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.record
}

// TestMCPWorkspaceModule: MCP's list_modules shows the workspace's own modules after the
// built-ins, and execute_component runs one as it runs a built-in.
func TestMCPWorkspaceModule(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := s.env.Workspace(t, 100)
	rc := &receiver{secret: "mcp-secret"}
	endpoint := httptest.NewServer(rc)
	t.Cleanup(endpoint.Close)
	price := billing.Credits(750)
	if _, err := s.env.Cmds.Modules.Register(ctx, commands.RegisterModule{WorkspaceID: ws, Name: "acme.double", Price: &price,
		InputSchema: json.RawMessage(`{"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}`),
		Transport:   commands.ModuleTransport{Type: "http", URL: endpoint.URL, Secret: "mcp-secret", AllowPrivate: true},
		By:          access.Rights{Role: "owner"}}); err != nil {
		t.Fatal(err)
	}
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws, Label: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.connect(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s.env.CaughtUp(t, "modules")
	mods := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "list_modules", Arguments: map[string]any{"limit": 100}}))
	data, _ := mods["data"].([]any)
	last, _ := data[len(data)-1].(map[string]any)
	if last["name"] != "acme.double" || last["transport"] != "http" || last["cost"] != 0.75 || mods["total"] != float64(len(data)) {
		t.Fatalf("list_modules: %v", mods)
	}
	rec := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{
		"module": "acme.double", "input": map[string]any{"n": 4}, "config": map[string]any{}, "waitForMs": 15000}}))
	if out, _ := rec["output"].(map[string]any); rec["status"] != "COMPLETED" || out["doubled"] != float64(8) || rec["totalUsage"] != 0.75 {
		t.Fatalf("execute_component: %v", rec)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{
		"module": "acme.double", "input": map[string]any{"n": "four"}, "config": map[string]any{}}})
	wantToolError(t, res, err, "input.n")
}
