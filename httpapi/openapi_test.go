package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/internal/openapitest"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/server"
	"github.com/switchyard/switchyard/testenv"
)

func loadSpec(t *testing.T) *openapitest.OpenAPI {
	t.Helper()
	spec, err := openapitest.Parse(httpapi.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// pendingRoutes are documented operations whose handlers are still being built ("POST
// /v1/..."): the route check logs them while no route serves them instead of failing, so the
// document can lead the code. Once a route lands it is checked like any other.
var pendingRoutes = map[string]bool{}

// mountedHere are the httpapi types the full stack below mounts; serve.go must mount no
// other, or the route check would miss its routes.
var mountedHere = []string{"SDKComponents", "SDKWorkflows", "MCP", "Workspaces", "DashboardRuns"}

// apiStack is the whole /v1 surface in process, mounted as cmd/switchyard/serve.go mounts
// it, over a real database with projections, executor, live hub and identity provider.
type apiStack struct {
	env    *testenv.Env
	server *httpapi.Server
	srv    *httptest.Server
	ws     string
	key    commands.APIKeyMinted
	email  string
}

const stackPassword = "correct horse battery"

func newAPIStack(t testing.TB) *apiStack {
	t.Helper()
	core := newTestCore(t, true)
	env, hub, log, reg := core.env, core.hub, core.log, core.reg
	ctx := context.Background()
	sealKey, _ := seal.GenerateKey()
	sealer, err := seal.New(sealKey)
	if err != nil {
		t.Fatal(err)
	}
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(env.Cmds.Workspaces.APIKey),
		RatePerSecond: 10000, Burst: 10000, Logger: log})
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	idp, err := identity.New(identity.Config{Issuer: srv.URL, Cmds: env.Cmds, Queries: env.Queries, Sealer: sealer, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := idp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The service's own routes (httpapi.Routes, as serve builds them), so the walk below
	// checks every route serve has.
	routes, err := server.Routes(server.RoutesConfig{Server: httpapi.ServerConfig{Logger: log}, Cmds: env.Cmds, Queries: env.Queries,
		Registry: reg, Hub: hub, SDKAuth: auth, Identity: idp, Tasks: executor.New(env.Store, env.Cmds, env.Queries, reg, hub, executor.Config{Logger: log})})
	if err != nil {
		t.Fatal(err)
	}
	handler = routes.Handler()

	s := &apiStack{env: env, server: routes, srv: srv, email: "staff-" + uuid.NewString()[:8] + "@example.com"}
	if _, err := env.Cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: s.email, Password: stackPassword, Staff: true}); err != nil {
		t.Fatal(err)
	}
	if s.ws, err = env.Cmds.Workspaces.CreateWorkspace(ctx, "openapi-"+uuid.NewString()[:8], s.email); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Cmds.Billing.TopUp(ctx, s.ws, 100_000, ""); err != nil {
		t.Fatal(err)
	}
	if s.key, err = env.Cmds.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: s.ws, Label: "openapi"}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpenAPIDocumentIsWellFormed(t *testing.T) {
	spec := loadSpec(t)
	if err := spec.CompileSchemas(); err != nil {
		t.Fatalf("component schemas: %v", err)
	}
	if broken := spec.Refs(); len(broken) > 0 {
		t.Fatalf("unresolved $refs: %v", broken)
	}
	doc := spec.Raw()
	comps := doc["components"].(map[string]any)
	params := comps["parameters"].(map[string]any)
	schemes := comps["securitySchemes"].(map[string]any)
	ids := map[string]string{}
	pathParam := regexp.MustCompile(`\{([^}]+)\}`)
	for _, op := range spec.Operations() {
		o := doc["paths"].(map[string]any)[op.Path].(map[string]any)[strings.ToLower(op.Method)].(map[string]any)
		id, _ := o["operationId"].(string)
		if id == "" || ids[id] != "" {
			t.Errorf("%s: operationId %q missing or also used by %s", op, id, ids[id])
		}
		ids[id] = op.String()
		if rs, _ := o["responses"].(map[string]any); len(rs) == 0 {
			t.Errorf("%s: no responses", op)
		}
		// Every operation states its security, even if none: a missing one would read as
		// "inherits the global default", and there is none.
		sec, ok := o["security"].([]any)
		if !ok {
			t.Errorf("%s: no security requirement", op)
		}
		for _, req := range sec {
			for name := range req.(map[string]any) {
				if schemes[name] == nil {
					t.Errorf("%s: unknown security scheme %s", op, name)
				}
			}
		}
		// Each path template variable is declared as a required path parameter.
		declared := map[string]bool{}
		list, _ := o["parameters"].([]any)
		for _, p := range list {
			pm := p.(map[string]any)
			if ref, ok := pm["$ref"].(string); ok {
				pm = params[strings.TrimPrefix(ref, "#/components/parameters/")].(map[string]any)
			}
			if pm["in"] == "path" && pm["required"] == true {
				declared[pm["name"].(string)] = true
			}
		}
		for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
			if !declared[m[1]] {
				t.Errorf("%s: path parameter %s is not declared", op, m[1])
			}
		}
	}
	// SPEC.md 5: the SDK headers, the bearer token and the MCP token are security schemes.
	for name, header := range map[string]string{"ApiKey": "X-Api-Key", "SdkTimestamp": "X-Sdk-Timestamp", "SdkSignature": "X-Sdk-Signature", "McpToken": "X-Mcp-Token"} {
		s, _ := schemes[name].(map[string]any)
		if s["type"] != "apiKey" || s["in"] != "header" || s["name"] != header {
			t.Errorf("security scheme %s = %v, want the header %s", name, s, header)
		}
	}
	if s, _ := schemes["SessionBearer"].(map[string]any); s["type"] != "http" || s["scheme"] != "bearer" {
		t.Errorf("SessionBearer = %v", s)
	}

	// Served as is at GET /openapi.json.
	srv := httptest.NewServer(httpapi.NewServer(httpapi.ServerConfig{}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, httpapi.OpenAPIDocument()) {
		t.Fatalf("GET /openapi.json: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/openapi.json", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	again, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation with the ETag: %d, want 304", again.StatusCode)
	}
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	// serve.go must not mount anything this stack leaves out.
	src, err := os.ReadFile("../cmd/switchyard/serve.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`&httpapi\.(\w+)\{`).FindAllStringSubmatch(string(src), -1) {
		if !slices.Contains(mountedHere, m[1]) {
			t.Errorf("cmd/switchyard/serve.go mounts httpapi.%s, which newAPIStack does not: add it there and to mountedHere", m[1])
		}
	}

	s := newAPIStack(t)
	undocumented, unserved, err := loadSpec(t).RouteDiff(s.server.Router, "/v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range undocumented {
		t.Errorf("served but not in httpapi/openapi.json: %s", r)
	}
	for _, r := range unserved {
		if pendingRoutes[r] {
			t.Logf("documented, not served yet: %s", r)
			continue
		}
		t.Errorf("documented in httpapi/openapi.json but not served: %s", r)
	}
}

// The route check itself: a route missing from the document, a method missing on a
// documented path and an extra alternative are reported; so is a documented route nobody
// serves.
func TestOpenAPIRouteCheckReportsDrift(t *testing.T) {
	spec := loadSpec(t)
	r := mux.NewRouter()
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	v1 := r.PathPrefix("/v1").Subrouter()
	skip := "POST /v1/sdk/components/executions/{executionId}/replay-callback"
	for _, op := range spec.Operations() {
		if op.String() == skip || strings.HasPrefix(op.Path, "/v1/developer/apps/{clientId}/") {
			continue
		}
		r.Handle(op.Path, nop).Methods(op.Method)
	}
	// Served under a subrouter, with a regexp of literal alternatives, one of them undocumented.
	v1.Handle("/developer/apps/{clientId}/{action:submit|secret|explode}", nop).Methods(http.MethodPost)
	v1.Handle("/sdk/undocumented/{id}", nop).Methods(http.MethodGet, http.MethodHead)
	v1.Handle("/sdk/components", nop).Methods(http.MethodPut)
	v1.Handle("/sdk/modules", nop).Methods(http.MethodHead) // covered by the documented GET
	v1.Handle("/sdk/anything", nop)                         // no method restriction
	r.Handle("/healthz", nop)                               // outside the prefix: ignored

	undocumented, unserved, err := spec.RouteDiff(r, "/v1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"* /v1/sdk/anything",
		"GET /v1/sdk/undocumented/{id}",
		"HEAD /v1/sdk/undocumented/{id}",
		"POST /v1/developer/apps/{clientId}/explode",
		"PUT /v1/sdk/components",
	}
	if fmt.Sprint(undocumented) != fmt.Sprint(want) {
		t.Errorf("undocumented:\n got %q\nwant %q", undocumented, want)
	}
	if fmt.Sprint(unserved) != fmt.Sprint([]string{skip}) {
		t.Errorf("unserved = %q, want only %q", unserved, skip)
	}
}

// sdkCall sends a signed SDK request the way a raw HTTP caller does (SPEC.md 5 rule 1).
func (s *apiStack) sdkCall(t testing.TB, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	if method != http.MethodGet {
		path += "?nonce=" + uuid.NewString() // two identical POSTs in one second would be a replay
	}
	key, err := client.ParseSecret(s.key.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("X-Api-Key", s.key.APIKey)
	req.Header.Set("X-Sdk-Timestamp", ts)
	req.Header.Set("X-Sdk-Signature", client.Sign(key, method, req.URL.RequestURI(), ts, []byte(body)))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return send(t, req)
}

// call sends a request with extra headers (name, value pairs).
func (s *apiStack) call(t testing.TB, method, path, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return send(t, req)
}

func send(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// conforms checks a response against the document and its status against want.
func conforms(t *testing.T, spec *openapitest.OpenAPI, resp *http.Response, body []byte, want int) map[string]any {
	t.Helper()
	req := resp.Request
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", req.Method, req.URL.Path, resp.StatusCode, want, body)
	}
	if err := spec.ValidateResponse(req.Method, req.URL.Path, resp.StatusCode, resp.Header, body); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	return m
}

// sseData splits a stream body into its data messages.
func sseData(body []byte) [][]byte {
	var out [][]byte
	var cur []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			cur = append(cur, strings.TrimPrefix(v, " "))
		}
		if line == "" && cur != nil {
			out = append(out, []byte(strings.Join(cur, "\n")))
			cur = nil
		}
	}
	return out
}

func TestOpenAPIResponsesMatchTheDocument(t *testing.T) {
	spec := loadSpec(t)
	s := newAPIStack(t)

	// Component executions (SPEC.md 4.1 to 4.4).
	resp, body := s.sdkCall(t, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{"a":1},"config":{},"waitForMs":10000}`)
	done := conforms(t, spec, resp, body, http.StatusOK)
	if done["status"] != "COMPLETED" {
		t.Fatalf("submit with waitForMs: %s", body)
	}
	completedBody := body
	id := done["id"].(string)
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{"b":2},"config":{},"callbackUrl":"https://example.com/hook","callbackSecret":"s","callbackHeaders":{"X-A":"1"}}`)
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.sdkCall(t, http.MethodGet, "/v1/sdk/components/executions/"+id, "")
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.sdkCall(t, http.MethodGet, "/v1/sdk/components/executions/"+uuid.NewString(), "")
	conforms(t, spec, resp, body, http.StatusNotFound)
	resp, body = s.sdkCall(t, http.MethodGet, "/v1/sdk/components/executions/"+id+"/stream", "")
	conforms(t, spec, resp, body, http.StatusOK)
	events := sseData(body)
	if len(events) == 0 {
		t.Fatalf("the stream of a finished execution sent no event: %q", body)
	}
	for _, e := range events {
		if err := spec.ValidateEvent(http.MethodGet, resp.Request.URL.Path, http.StatusOK, e); err != nil {
			t.Fatal(err)
		}
	}
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/components/executions/"+id+"/replay-callback", "")
	conforms(t, spec, resp, body, resp.StatusCode) // 200 or 409 (no callbackUrl): both documented
	resp, body = s.sdkCall(t, http.MethodGet, "/v1/sdk/modules?limit=3&page=2", "")
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/components", `{"module":"no.such","input":{},"config":{}}`)
	conforms(t, spec, resp, body, http.StatusBadRequest)
	resp, body = s.call(t, http.MethodGet, "/v1/sdk/components/executions/"+id, "", "X-Api-Key", s.key.APIKey)
	conforms(t, spec, resp, body, http.StatusUnauthorized)

	// Dashboard sign-in, then the workspace endpoints with the member's session (SPEC.md 4.9).
	resp, body = s.call(t, http.MethodPost, "/v1/auth/login", `{"email":"`+s.email+`","password":"wrong password"}`)
	conforms(t, spec, resp, body, http.StatusUnauthorized)
	resp, body = s.call(t, http.MethodPost, "/v1/auth/login", `{"email":"`+s.email+`","password":"`+stackPassword+`"}`)
	session := conforms(t, spec, resp, body, http.StatusOK)
	bearer := []string{"Authorization", "Bearer " + session["token"].(string)}
	ws := "/v1/workspaces/" + s.ws
	for _, path := range []string{ws + "/billing", ws + "/billing/transactions", ws + "/workflows?limit=5", ws + "/authorizations", ws + "/mcp-tokens"} {
		resp, body = s.call(t, http.MethodGet, path, "", bearer...)
		conforms(t, spec, resp, body, http.StatusOK)
	}
	resp, body = s.call(t, http.MethodGet, ws+"/billing", "")
	conforms(t, spec, resp, body, http.StatusUnauthorized)
	resp, body = s.call(t, http.MethodGet, "/v1/workspaces/"+uuid.NewString()+"/billing", "", bearer...)
	conforms(t, spec, resp, body, http.StatusForbidden)
	resp, body = s.call(t, http.MethodPost, ws+"/api-keys", `{"label":"ci","allowedWorkflowIds":[],"expiresAt":null}`, bearer...)
	conforms(t, spec, resp, body, http.StatusCreated)
	resp, body = s.call(t, http.MethodPost, ws+"/api-keys", `{"labl":"typo"}`, bearer...)
	conforms(t, spec, resp, body, http.StatusBadRequest)
	resp, body = s.call(t, http.MethodPost, ws+"/mcp-tokens", `{"label":"agent"}`, bearer...)
	mcpToken := conforms(t, spec, resp, body, http.StatusCreated)

	// MCP: the handshake with the token, and a refusal without it.
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"openapi-test","version":"1"}}}`
	mcpHeaders := []string{"Accept", "application/json, text/event-stream"}
	resp, body = s.call(t, http.MethodPost, "/v1/mcp", initialize, append(mcpHeaders, "X-Mcp-Token", mcpToken["token"].(string))...)
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.call(t, http.MethodPost, "/v1/mcp", initialize, mcpHeaders...)
	conforms(t, spec, resp, body, http.StatusUnauthorized)
	// The endpoint is stateless: GET and DELETE have no session to act on, and answer so.
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		resp, body = s.call(t, method, "/v1/mcp", "", append(mcpHeaders, "X-Mcp-Token", mcpToken["token"].(string))...)
		conforms(t, spec, resp, body, resp.StatusCode)
	}
	resp, body = s.call(t, http.MethodDelete, ws+"/mcp-tokens/"+mcpToken["id"].(string), "", bearer...)
	conforms(t, spec, resp, body, http.StatusNoContent)

	// Workspace modules (docs/modules.md), registered by the owner's session.
	module := `{"name":"acme.docs","inputSchema":{"type":"object"},"price":0.5,"transport":{"type":"http","url":"https://example.com/task","secret":"s"}}`
	resp, body = s.call(t, http.MethodPost, ws+"/modules", module, bearer...)
	conforms(t, spec, resp, body, http.StatusCreated)
	resp, body = s.call(t, http.MethodPost, ws+"/modules", module, bearer...)
	conforms(t, spec, resp, body, http.StatusConflict)
	resp, body = s.call(t, http.MethodPost, ws+"/modules", `{"name":"core.docs","transport":{"type":"worker"}}`, bearer...)
	conforms(t, spec, resp, body, http.StatusBadRequest)
	resp, body = s.call(t, http.MethodGet, ws+"/modules/acme.docs", "", bearer...)
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.call(t, http.MethodPut, ws+"/modules/acme.docs", `{"description":"d","transport":{"type":"worker"}}`, bearer...)
	conforms(t, spec, resp, body, http.StatusOK)
	s.env.CaughtUp(t, "modules")
	resp, body = s.call(t, http.MethodGet, ws+"/modules?limit=5", "", bearer...)
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.call(t, http.MethodDelete, ws+"/modules/acme.docs", "", bearer...)
	conforms(t, spec, resp, body, http.StatusNoContent)
	resp, body = s.call(t, http.MethodGet, ws+"/modules/acme.docs", "", bearer...)
	conforms(t, spec, resp, body, http.StatusNotFound)

	// Workflows: defined with the session (SPEC.md 4.9), run with the API key (SPEC.md 4.5 to 4.8).
	def := `{"name":"docs-flow","description":"echo","components":[{"id":"start","module":"ON_API_CALLED","position":[0,0]},` +
		`{"id":"echo","name":"Echo","module":"core.echo","config":{},"position":[200,0],"attempts":2}],"edges":[{"from":"start","to":"echo"}]}`
	resp, body = s.call(t, http.MethodPost, ws+"/workflows", def, bearer...)
	wf := conforms(t, spec, resp, body, http.StatusCreated)
	wfID := wf["id"].(string)
	resp, body = s.call(t, http.MethodPost, ws+"/workflows", def, bearer...)
	conforms(t, spec, resp, body, http.StatusConflict)
	resp, body = s.call(t, http.MethodPost, ws+"/workflows", `{"name":"x","components":[{"id":"a","module":"core.echo","colour":1}]}`, bearer...)
	conforms(t, spec, resp, body, http.StatusBadRequest)
	resp, body = s.call(t, http.MethodGet, ws+"/workflows/"+wfID, "", bearer...)
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.call(t, http.MethodPut, ws+"/workflows/"+wfID, strings.Replace(def, `"description":"echo"`, `"description":"echo v2"`, 1), bearer...)
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.call(t, http.MethodGet, ws+"/workflows/"+uuid.NewString(), "", bearer...)
	conforms(t, spec, resp, body, http.StatusNotFound)
	resp, body = s.sdkCall(t, http.MethodGet, "/v1/sdk/workflows?limit=10", "")
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/workflows/"+wfID+"/components/echo", `{"name":"Echo 2","position":[210,5],"config":{}}`)
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/workflows/"+wfID+"/components/nope", `{"name":"x"}`)
	conforms(t, spec, resp, body, http.StatusNotFound)
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/workflows/"+uuid.NewString(), "")
	conforms(t, spec, resp, body, http.StatusNotFound)
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/workflows/"+wfID, `[1]`)
	conforms(t, spec, resp, body, http.StatusBadRequest)
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/workflows/"+wfID, `{"order":7}`)
	conforms(t, spec, resp, body, http.StatusOK)
	var triggered []map[string]any
	if err := json.Unmarshal(body, &triggered); err != nil || len(triggered) != 1 {
		t.Fatalf("trigger answered %s", body)
	}
	runPath := "/v1/sdk/workflows/executions/" + triggered[0]["runId"].(string)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, body = s.sdkCall(t, http.MethodGet, runPath, "")
		r := conforms(t, spec, resp, body, http.StatusOK)
		if r["status"] == "COMPLETED" || r["status"] == "FAILED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish within 30s: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, body = s.sdkCall(t, http.MethodGet, runPath+"/stream", "")
	conforms(t, spec, resp, body, http.StatusOK)
	runEvents := sseData(body)
	if len(runEvents) == 0 {
		t.Fatalf("the stream of a finished run sent no event: %q", body)
	}
	for _, e := range runEvents {
		if err := spec.ValidateEvent(http.MethodGet, resp.Request.URL.Path, http.StatusOK, e); err != nil {
			t.Fatal(err)
		}
	}
	resp, body = s.sdkCall(t, http.MethodPost, runPath+"/cancel", `{"reason":"too late"}`)
	conforms(t, spec, resp, body, http.StatusConflict)
	resp, body = s.sdkCall(t, http.MethodPost, runPath+"/rerun", `{"fromStage":"nope"}`)
	conforms(t, spec, resp, body, http.StatusBadRequest)
	resp, body = s.sdkCall(t, http.MethodPost, runPath+"/rerun", "")
	conforms(t, spec, resp, body, http.StatusOK)
	resp, body = s.sdkCall(t, http.MethodGet, "/v1/sdk/workflows/executions/"+uuid.NewString(), "")
	conforms(t, spec, resp, body, http.StatusNotFound)
	// A run cancelled while it may still be going: 200 with cancelRequestedAt, or 409 if it won
	// the race; both are documented.
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/workflows/"+wfID, "")
	conforms(t, spec, resp, body, http.StatusOK)
	_ = json.Unmarshal(body, &triggered)
	resp, body = s.sdkCall(t, http.MethodPost, "/v1/sdk/workflows/executions/"+triggered[0]["runId"].(string)+"/cancel", `{"reason":"docs"}`)
	conforms(t, spec, resp, body, resp.StatusCode)
	resp, body = s.call(t, http.MethodDelete, ws+"/workflows/"+wfID, "", bearer...)
	conforms(t, spec, resp, body, http.StatusNoContent)

	// Developer apps and review (the staff user reviews its own app).
	resp, body = s.call(t, http.MethodPost, "/v1/developer/apps", `{"name":"Docs App","description":"d","logoUrl":"","redirectUris":["https://app.example.com/cb"],"scopes":["openid","workspace:read"]}`, bearer...)
	app := conforms(t, spec, resp, body, http.StatusCreated)
	appPath := "/v1/developer/apps/" + app["clientId"].(string)
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodGet, "/v1/developer/apps", "", http.StatusOK},
		{http.MethodGet, appPath, "", http.StatusOK},
		{http.MethodPatch, appPath, `{"name":"Docs App 2","redirectUris":["https://app.example.com/cb"],"scopes":["openid"]}`, http.StatusOK},
		{http.MethodPost, appPath + "/secret", "", http.StatusOK},
		{http.MethodPost, appPath + "/submit", "", http.StatusOK},
		{http.MethodGet, "/v1/review/apps", "", http.StatusOK},
		{http.MethodPost, "/v1/review/apps/" + app["clientId"].(string) + "/approve", `{"revision":1}`, http.StatusConflict},
		{http.MethodPost, "/v1/review/apps/" + app["clientId"].(string) + "/approve", `{"revision":2}`, http.StatusOK},
		{http.MethodPost, "/v1/review/apps/" + app["clientId"].(string) + "/revert", `{"reason":"docs"}`, http.StatusOK},
		{http.MethodGet, "/v1/developer/apps/" + uuid.NewString(), "", http.StatusNotFound},
	} {
		resp, body = s.call(t, c.method, c.path, c.body, bearer...)
		conforms(t, spec, resp, body, c.status)
	}

	// The checker's own negative cases: answers that differ from the document are reported.
	var rec map[string]any
	if err := json.Unmarshal(completedBody, &rec); err != nil {
		t.Fatal(err)
	}
	execPath := "/v1/sdk/components/executions/" + id
	jsonHeader := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	for name, mutate := range map[string]func(m map[string]any){
		"an unknown status":       func(m map[string]any) { m["status"] = "DONE" },
		"a missing member":        func(m map[string]any) { delete(m, "callback") },
		"an undocumented member":  func(m map[string]any) { m["extra"] = true },
		"a wrong type":            func(m map[string]any) { m["totalUsage"] = "1" },
		"a malformed timestamp":   func(m map[string]any) { m["createdAt"] = "yesterday" },
		"a nested wrong type":     func(m map[string]any) { m["callback"].(map[string]any)["attemptCount"] = -1 },
		"a non-UUID execution id": func(m map[string]any) { m["id"] = "e1" },
	} {
		m := map[string]any{}
		for k, v := range rec {
			m[k] = v
		}
		cb := map[string]any{}
		for k, v := range rec["callback"].(map[string]any) {
			cb[k] = v
		}
		m["callback"] = cb
		mutate(m)
		b, _ := json.Marshal(m)
		if err := spec.ValidateResponse(http.MethodGet, execPath, http.StatusOK, jsonHeader, b); err == nil {
			t.Errorf("a body with %s passed: %s", name, b)
		}
	}
	if err := spec.ValidateResponse(http.MethodGet, execPath, http.StatusOK, jsonHeader, completedBody); err != nil {
		t.Errorf("the untouched body: %v", err)
	}
	if err := spec.ValidateResponse(http.MethodGet, execPath, http.StatusTeapot, jsonHeader, completedBody); err == nil {
		t.Error("an undocumented status passed")
	}
	if err := spec.ValidateResponse(http.MethodGet, execPath, http.StatusOK, http.Header{"Content-Type": {"text/plain"}}, completedBody); err == nil {
		t.Error("an undocumented content type passed")
	}
	if err := spec.ValidateResponse(http.MethodGet, execPath, http.StatusNotFound, jsonHeader, []byte(`{"message":"x","statusCode":404}`)); err == nil {
		t.Error("an error body without its error member passed")
	}
	if err := spec.ValidateResponse(http.MethodDelete, ws+"/mcp-tokens/x", http.StatusNoContent, http.Header{}, []byte(`{}`)); err == nil {
		t.Error("a body on a documented 204 passed")
	}
	if err := spec.ValidateEvent(http.MethodGet, execPath+"/stream", http.StatusOK, []byte(`{"id":"x","status":"EXPLODED","timestamp":"2026-01-02T03:04:05Z"}`)); err == nil {
		t.Error("a stream event with an unknown status passed")
	}
	if err := spec.ValidateResponse(http.MethodGet, "/v1/no/such/route", http.StatusOK, jsonHeader, []byte(`{}`)); err == nil {
		t.Error("a path the document lacks passed")
	}
}
