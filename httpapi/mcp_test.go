package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/testenv"
)

// fakeBearer is a BearerVerifier over principals the test hands out by token.
type fakeBearer map[string]identity.Principal

func (f fakeBearer) VerifyBearer(_ context.Context, token string) (identity.Principal, error) {
	p, ok := f[token]
	if !ok {
		return identity.Principal{}, identity.ErrInvalidToken
	}
	return p, nil
}

// mcpStack is the MCP endpoint and the workspace endpoints in process: real Postgres,
// projections, executor, live hub and rate limiter.
type mcpStack struct {
	env    *testenv.Env
	srv    *httptest.Server
	bearer fakeBearer
}

func newMCPStack(t *testing.T, rate float64, burst int) *mcpStack {
	t.Helper()
	core := newTestCore(t, true)
	env, hub, log, reg := core.env, core.hub, core.log, core.reg
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(env.Cmds.Workspaces.APIKey),
		RatePerSecond: rate, Burst: burst, Logger: log})
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: log})
	(&httpapi.MCP{Cmds: env.Cmds, Queries: env.Queries, Registry: reg, Hub: hub, RateLimit: auth.Limit, Logger: log}).Mount(server.V1)
	bearer := fakeBearer{}
	(&httpapi.Workspaces{Cmds: env.Cmds, Queries: env.Queries, Auth: bearer}).Mount(server.V1)
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	return &mcpStack{env: env, srv: srv, bearer: bearer}
}

// owner is the user id of the workspace's owner: an app's token acts for a member, with no more
// than the member's role holds.
func (s *mcpStack) owner(t *testing.T, ws string) string {
	t.Helper()
	st, err := s.env.Cmds.Workspaces.Workspace(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for id, role := range st.Members {
		if role == "owner" {
			return id
		}
	}
	t.Fatalf("workspace %s has no owner", ws)
	return ""
}

// tokenHeader adds X-Mcp-Token to every request of an MCP client.
type tokenHeader struct {
	token string
	base  http.RoundTripper
}

func (h tokenHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set(httpapi.HeaderMCPToken, h.token)
	}
	return h.base.RoundTrip(r)
}

// connect opens an MCP client session with the go-sdk client over streamable HTTP.
func (s *mcpStack) connect(ctx context.Context, token string) (*mcp.ClientSession, error) {
	cl := mcp.NewClient(&mcp.Implementation{Name: "switchyard-test", Version: "1.0.0"}, nil)
	return cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.srv.URL + "/v1/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: tokenHeader{token: token, base: http.DefaultTransport}}}, nil)
}

// rawMCP posts one JSON-RPC message as a third-party MCP client would.
func (s *mcpStack) rawMCP(t *testing.T, method, token, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+"/v1/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set(httpapi.HeaderMCPToken, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func toolCall(id int, name, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
}

// wantSpecError checks the SPEC.md 7 error body.
func wantSpecError(t *testing.T, resp *http.Response, body []byte, status int, message string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	var e httpapi.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil || e.StatusCode != status || e.Error != http.StatusText(status) ||
		!strings.Contains(e.Message, message) {
		t.Fatalf("error body %s, want statusCode %d and a message with %q", body, status, message)
	}
}

// structured decodes a successful tool result's structured content: structured(t)(call).
func structured(t *testing.T) func(*mcp.CallToolResult, error) map[string]any {
	return func(res *mcp.CallToolResult, err error) map[string]any {
		t.Helper()
		return structuredOf(t, res, err)
	}
}

func structuredOf(t *testing.T, res *mcp.CallToolResult, err error) map[string]any {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("tool failed: %s", toolText(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	// The text content carries the same JSON, for clients that read only text.
	var fromText map[string]any
	if err := json.Unmarshal([]byte(toolText(res)), &fromText); err != nil || fmt.Sprint(fromText) != fmt.Sprint(m) {
		t.Fatalf("text content %q differs from the structured content %s", toolText(res), b)
	}
	return m
}

func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// wantToolError checks that a call ended in a tool error the model can read.
func wantToolError(t *testing.T, res *mcp.CallToolResult, err error, contains string) {
	t.Helper()
	if err != nil {
		t.Fatalf("want a tool error, got the protocol error %v", err)
	}
	if !res.IsError || !strings.Contains(toolText(res), contains) {
		t.Fatalf("result %+v (%q), want a tool error containing %q", res, toolText(res), contains)
	}
}

// mcpTools are every tool the endpoint offers.
var mcpTools = []string{"bulk_runs", "cancel_run", "execute_component", "get_balance", "get_bulk", "get_execution", "get_run", "list_modules",
	"list_schedules", "list_workflows", "pause_schedule", "resume_schedule", "send_event", "signal_run", "trigger_schedule", "trigger_workflow"}

func TestMCPEndpointWithTheGoSDKClient(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := s.env.Workspace(t, 100)
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws, Label: "desktop"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.connect(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		schema, ok := tool.InputSchema.(map[string]any)
		if !ok || schema["type"] != "object" || tool.Description == "" {
			t.Fatalf("tool %s: input schema %v, description %q", tool.Name, tool.InputSchema, tool.Description)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("tools %v, want %v", names, mcpTools)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "execute_component" {
			props, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
			for _, p := range []string{"module", "input", "config", "attempts", "waitForMs"} {
				if _, ok := props[p]; !ok {
					t.Fatalf("execute_component's schema lacks %s: %v", p, tool.InputSchema)
				}
			}
		}
	}

	mods := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "list_modules", Arguments: map[string]any{"limit": 100}}))
	data, _ := mods["data"].([]any)
	if len(data) == 0 || mods["total"] != float64(len(data)) || mods["page"] != float64(1) {
		t.Fatalf("list_modules: %v", mods)
	}
	foundEcho := false
	for _, d := range data {
		if m, _ := d.(map[string]any); m["name"] == "core.echo" && m["inputSchema"] != nil && m["cost"] == float64(1) {
			foundEcho = true
		}
	}
	if !foundEcho {
		t.Fatalf("list_modules lacks core.echo with its schema and cost: %v", data)
	}

	bal := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance"}))
	if bal["total"] != float64(100) || bal["credit"] != float64(100) || bal["usage"] != float64(0) {
		t.Fatalf("balance before: %v", bal)
	}

	rec := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{
		"module": "core.echo", "input": map[string]any{"hello": "mcp", "n": 12345678901234567}, "config": map[string]any{}, "waitForMs": 15000}}))
	out, _ := rec["output"].(map[string]any)
	if rec["status"] != "COMPLETED" || rec["completed"] != true || out["hello"] != "mcp" || rec["module"] != "core.echo" ||
		rec["totalUsage"] != float64(1) || rec["error"] != nil {
		t.Fatalf("execute_component with waiting: %v", rec)
	}
	if _, ok := rec["callback"].(map[string]any); !ok {
		t.Fatalf("the record lacks the SPEC.md 2.1 callback object: %v", rec)
	}
	id := fmt.Sprint(rec["id"])
	// The input reaches the module as sent: a large integer keeps every digit.
	st, err := s.env.Cmds.Executions.Execution(ctx, id)
	if err != nil || !strings.Contains(string(st.Output), "12345678901234567") {
		t.Fatalf("stored output %s, %v", st.Output, err)
	}
	got := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_execution", Arguments: map[string]any{"executionId": id}}))
	if got["id"] != id || got["status"] != "COMPLETED" {
		t.Fatalf("get_execution: %v", got)
	}

	// The call was billed like an SDK call.
	testenv.Eventually(t, 30*time.Second, "the balance to drop by the module's cost", func() bool {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance", Arguments: map[string]any{}})
		return err == nil && !res.IsError && fmt.Sprint(res.StructuredContent.(map[string]any)["total"]) == "99"
	})

	// Without waiting the call returns the CREATED record at once.
	created := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{
		"module": "core.echo", "input": map[string]any{"second": true}, "config": map[string]any{}}}))
	if created["status"] != "CREATED" || created["completed"] != false || created["output"] != nil || created["totalUsage"] != float64(0) {
		t.Fatalf("execute_component without waiting: %v", created)
	}

	t.Run("tool errors name the problem", func(t *testing.T) {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{
			"module": "no.such", "input": map[string]any{}, "config": map[string]any{}}})
		wantToolError(t, res, err, "module")
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{
			"module": "core.echo", "input": map[string]any{}, "config": map[string]any{}, "attempts": 4}})
		wantToolError(t, res, err, "attempts")
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{
			"module": "core.echo", "input": map[string]any{}, "config": map[string]any{}, "callbackUrl": "https://example.com/"}})
		wantToolError(t, res, err, "callbackUrl")
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{"module": "core.echo"}})
		wantToolError(t, res, err, "input")
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_execution", Arguments: map[string]any{"executionId": "nope"}})
		wantToolError(t, res, err, "not found")
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "list_modules", Arguments: map[string]any{"limit": 1000}})
		wantToolError(t, res, err, "limit")
	})

	t.Run("another workspace's execution is not found", func(t *testing.T) {
		other := s.env.Workspace(t, 10)
		otherTok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: other})
		if err != nil {
			t.Fatal(err)
		}
		otherSess, err := s.connect(ctx, otherTok.Token)
		if err != nil {
			t.Fatal(err)
		}
		defer otherSess.Close()
		res, err := otherSess.CallTool(ctx, &mcp.CallToolParams{Name: "get_execution", Arguments: map[string]any{"executionId": id}})
		wantToolError(t, res, err, "not found")
		b := structured(t)(otherSess.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance"}))
		if b["total"] != float64(10) {
			t.Fatalf("the other workspace's balance: %v", b)
		}
	})

	t.Run("transport errors have the SPEC body", func(t *testing.T) {
		resp, body := s.rawMCP(t, http.MethodGet, tok.Token, "application/json", "")
		wantSpecError(t, resp, body, http.StatusMethodNotAllowed, "")
		resp, body = s.rawMCP(t, http.MethodPost, tok.Token, "text/plain", toolCall(1, "get_balance", "{}"))
		wantSpecError(t, resp, body, http.StatusUnsupportedMediaType, "application/json")
	})

	t.Run("missing or wrong token is 401", func(t *testing.T) {
		resp, body := s.rawMCP(t, http.MethodPost, "", "application/json", toolCall(1, "get_balance", "{}"))
		wantSpecError(t, resp, body, http.StatusUnauthorized, "missing MCP token")
		wrong := tok.Token[:len(tok.Token)-1] + map[bool]string{true: "0", false: "1"}[strings.HasSuffix(tok.Token, "1")]
		for _, bad := range []string{"garbage", wrong, "mcp_00000000-0000-4000-8000-000000000000_" + strings.Repeat("0", 64)} {
			resp, body = s.rawMCP(t, http.MethodPost, bad, "application/json", toolCall(1, "get_balance", "{}"))
			wantSpecError(t, resp, body, http.StatusUnauthorized, "invalid MCP token")
		}
		if _, err := s.connect(ctx, ""); err == nil {
			t.Fatal("the go-sdk client connected without a token")
		}
		if _, err := s.connect(ctx, wrong); err == nil {
			t.Fatal("the go-sdk client connected with a wrong token")
		}
		// The right token works over raw HTTP too, without a handshake: the server is stateless.
		resp, body = s.rawMCP(t, http.MethodPost, tok.Token, "application/json", toolCall(7, "get_balance", "{}"))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"id":7`) || !strings.Contains(string(body), `"total`) {
			t.Fatalf("raw tools/call: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("a revoked token fails at once", func(t *testing.T) {
		admin := "admin-" + ws
		s.bearer[admin] = identity.Principal{UserID: s.owner(t, ws), ClientID: "app", WorkspaceID: ws, Scopes: []string{identity.ScopeWorkspaceAdmin}}
		resp, body := s.bearerDo(t, http.MethodDelete, "/v1/workspaces/"+ws+"/mcp-tokens/"+tok.ID, admin, "")
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", resp.StatusCode, body)
		}
		if _, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance"}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
			t.Fatalf("a call with the revoked token: %v, want Unauthorized", err)
		}
		resp, body = s.rawMCP(t, http.MethodPost, tok.Token, "application/json", toolCall(1, "get_balance", "{}"))
		wantSpecError(t, resp, body, http.StatusUnauthorized, "invalid MCP token")
		if _, err := s.connect(ctx, tok.Token); err == nil {
			t.Fatal("the go-sdk client connected with a revoked token")
		}
	})
}

func TestMCPExpiredTokenIs401(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ctx := context.Background()
	ws := s.env.Workspace(t, 10)
	// A token that expires in a moment: minted with the real clock, checked after its expiry.
	expires := time.Now().Add(300 * time.Millisecond)
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws, ExpiresAt: &expires})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the token to expire", func() bool { return !time.Now().Before(expires) })
	resp, body := s.rawMCP(t, http.MethodPost, tok.Token, "application/json", toolCall(1, "get_balance", "{}"))
	wantSpecError(t, resp, body, http.StatusUnauthorized, "invalid MCP token")
}

func TestMCPRateLimitSharesTheSDKLimiter(t *testing.T) {
	// Three tokens of burst and next to no refill: every call's cost shows in the headers.
	s := newMCPStack(t, 0.001, 3)
	ctx := context.Background()
	ws := s.env.Workspace(t, 10)
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	call := func(name, args string) (*http.Response, []byte) {
		return s.rawMCP(t, http.MethodPost, tok.Token, "application/json", toolCall(1, name, args))
	}
	resp, body := call("get_balance", "{}")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Limit") != "3" || resp.Header.Get("RateLimit-Remaining") != "2" {
		t.Fatalf("first call: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// execute_component costs 2, as the SDK submit does: 2 left, so it passes and leaves 0.
	resp, body = call("execute_component", `{"module":"core.echo","input":{},"config":{}}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("execute_component: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = call("get_balance", "{}")
	wantSpecError(t, resp, body, http.StatusTooManyRequests, "rate limit")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", resp.Header)
	}
	// Another token has a bucket of its own.
	tok2, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	resp, body = s.rawMCP(t, http.MethodPost, tok2.Token, "application/json", toolCall(1, "get_balance", "{}"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a second token: %d %s", resp.StatusCode, body)
	}
	// An unauthenticated request spends nothing of anyone's bucket and is refused first.
	resp, body = s.rawMCP(t, http.MethodPost, "", "application/json", toolCall(1, "get_balance", "{}"))
	wantSpecError(t, resp, body, http.StatusUnauthorized, "missing")
}

// bearerDo sends a workspace-endpoint request with a bearer token.
func (s *mcpStack) bearerDo(t *testing.T, method, path, bearer, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestMCPTokenWorkspaceEndpoints(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ws := s.env.Workspace(t, 10)
	other := s.env.Workspace(t, 10)
	s.bearer["admin"] = identity.Principal{UserID: s.owner(t, ws), ClientID: "app", WorkspaceID: ws, Scopes: []string{identity.ScopeWorkspaceAdmin}}
	s.bearer["reader"] = identity.Principal{UserID: s.owner(t, ws), ClientID: "app", WorkspaceID: ws,
		Scopes: []string{identity.ScopeWorkspaceRead, identity.ScopeReadBilling, identity.ScopeAPIKeys}}
	s.bearer["other-admin"] = identity.Principal{UserID: s.owner(t, other), ClientID: "app", WorkspaceID: other, Scopes: []string{identity.ScopeWorkspaceAdmin}}
	base := "/v1/workspaces/" + ws + "/mcp-tokens"

	resp, body := s.bearerDo(t, http.MethodPost, base, "admin", `{"label":"claude desktop","expiresAt":"2099-01-01T00:00:00Z"}`)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("mint: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	var minted struct {
		ID, Token, WorkspaceID, Label string
		ExpiresAt                     *time.Time
		CreatedAt                     time.Time
	}
	if err := json.Unmarshal(body, &minted); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(minted.Token, "mcp_"+minted.ID+"_") || minted.WorkspaceID != ws || minted.Label != "claude desktop" ||
		minted.ExpiresAt == nil || minted.ExpiresAt.Year() != 2099 || minted.CreatedAt.IsZero() {
		t.Fatalf("minted %s", body)
	}
	// The minted token works on /v1/mcp at once.
	mresp, mbody := s.rawMCP(t, http.MethodPost, minted.Token, "application/json", toolCall(1, "get_balance", "{}"))
	if mresp.StatusCode != http.StatusOK {
		t.Fatalf("the new token on /v1/mcp: %d %s", mresp.StatusCode, mbody)
	}
	for i := 0; i < 2; i++ {
		if resp, body := s.bearerDo(t, http.MethodPost, base, "admin", `{}`); resp.StatusCode != http.StatusCreated {
			t.Fatalf("mint without a label: %d %s", resp.StatusCode, body)
		}
	}

	t.Run("list is paginated and never shows a token", func(t *testing.T) {
		// CaughtUp reads the log only up to its horizon, which an append still running
		// elsewhere can hold before the mints: wait for the list itself to show all three.
		var (
			resp *http.Response
			body []byte
			page struct {
				Data                    []map[string]any
				Total, Page, TotalPages int
			}
		)
		testenv.Eventually(t, 60*time.Second, "the list to show the three tokens", func() bool {
			resp, body = s.bearerDo(t, http.MethodGet, base+"?page=1&limit=2", "admin", "")
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil {
				t.Fatalf("list: %d %s", resp.StatusCode, body)
			}
			return page.Total >= 3
		})
		if page.Total != 3 || page.Page != 1 || page.TotalPages != 2 || len(page.Data) != 2 {
			t.Fatalf("page 1: %s", body)
		}
		if strings.Contains(string(body), "mcp_") || strings.Contains(string(body), "hash") || strings.Contains(string(body), `"token"`) {
			t.Fatalf("the list shows token material: %s", body)
		}
		resp, body = s.bearerDo(t, http.MethodGet, base+"?page=2&limit=2", "admin", "")
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Data) != 1 || page.Data[0]["id"] != minted.ID ||
			page.Data[0]["label"] != "claude desktop" || page.Data[0]["revokedAt"] != nil {
			t.Fatalf("page 2 (the oldest token): %s", body)
		}
		resp, body = s.bearerDo(t, http.MethodGet, base+"?limit=0", "admin", "")
		wantSpecError(t, resp, body, http.StatusBadRequest, "limit")
		// The other workspace lists none of them.
		resp, body = s.bearerDo(t, http.MethodGet, "/v1/workspaces/"+other+"/mcp-tokens", "other-admin", "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"total":0`) {
			t.Fatalf("the other workspace's list: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("workspace:admin is required", func(t *testing.T) {
		for _, req := range []struct{ method, path, body string }{
			{http.MethodPost, base, `{}`}, {http.MethodGet, base, ""}, {http.MethodDelete, base + "/" + minted.ID, ""},
		} {
			resp, body := s.bearerDo(t, req.method, req.path, "reader", req.body)
			wantSpecError(t, resp, body, http.StatusForbidden, "workspace:admin")
			resp, body = s.bearerDo(t, req.method, req.path, "", req.body)
			wantSpecError(t, resp, body, http.StatusUnauthorized, "")
			// An admin of another workspace cannot act on this one.
			resp, body = s.bearerDo(t, req.method, req.path, "other-admin", req.body)
			wantSpecError(t, resp, body, http.StatusForbidden, "")
		}
	})

	t.Run("bad bodies are 400", func(t *testing.T) {
		for body, field := range map[string]string{
			`{"label":"x","expiresAt":"2001-01-01T00:00:00Z"}`: "expiresAt",
			`{"label":"` + strings.Repeat("l", 201) + `"}`:     "label",
			`{"scopes":["all"]}`:                               "scopes",
			`[1]`:                                              "JSON object",
		} {
			resp, rb := s.bearerDo(t, http.MethodPost, base, "admin", body)
			wantSpecError(t, resp, rb, http.StatusBadRequest, field)
		}
	})

	t.Run("revoke", func(t *testing.T) {
		// Another workspace's token is not found, through that workspace's own route.
		resp, body := s.bearerDo(t, http.MethodDelete, "/v1/workspaces/"+other+"/mcp-tokens/"+minted.ID, "other-admin", "")
		wantSpecError(t, resp, body, http.StatusNotFound, "not found")
		for _, id := range []string{"00000000-0000-4000-8000-000000000000", "not-a-uuid"} {
			resp, body = s.bearerDo(t, http.MethodDelete, base+"/"+id, "admin", "")
			wantSpecError(t, resp, body, http.StatusNotFound, "not found")
		}
		if resp, body := s.bearerDo(t, http.MethodDelete, base+"/"+minted.ID, "admin", ""); resp.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Fatalf("revoke: %d %s", resp.StatusCode, body)
		}
		mresp, mbody := s.rawMCP(t, http.MethodPost, minted.Token, "application/json", toolCall(1, "get_balance", "{}"))
		wantSpecError(t, mresp, mbody, http.StatusUnauthorized, "invalid MCP token")
		if resp, body := s.bearerDo(t, http.MethodDelete, base+"/"+minted.ID, "admin", ""); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("a second revoke: %d %s", resp.StatusCode, body)
		}
		s.env.CaughtUp(t, "mcptokens")
		rows, _, err := s.env.Queries.MCPTokensOf(context.Background(), ws, projections.Page{Page: 1, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		revoked := 0
		for _, r := range rows {
			if r.RevokedAt != nil {
				revoked++
				if r.ID != minted.ID {
					t.Fatalf("token %s shows as revoked", r.ID)
				}
			}
		}
		if revoked != 1 {
			t.Fatalf("%d revoked rows, want 1", revoked)
		}
	})
}

func TestMCPTokenSessionOfAMember(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ws := s.env.Workspace(t, 10)
	st, err := s.env.Cmds.Workspaces.Workspace(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	var owner string
	for id, role := range st.Members {
		if role == "owner" {
			owner = id
		}
	}
	s.bearer["owner-session"] = identity.Principal{Session: true, UserID: owner}
	s.bearer["stranger-session"] = identity.Principal{Session: true, UserID: "someone-else"}
	resp, body := s.bearerDo(t, http.MethodPost, "/v1/workspaces/"+ws+"/mcp-tokens", "owner-session", `{"label":"mine"}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the owner's session mints: %d %s", resp.StatusCode, body)
	}
	resp, body = s.bearerDo(t, http.MethodPost, "/v1/workspaces/"+ws+"/mcp-tokens", "stranger-session", `{}`)
	wantSpecError(t, resp, body, http.StatusForbidden, "member")
}

// workflowOf creates a workflow whose ON_API_CALLED trigger feeds one module stage.
func workflowOf(t *testing.T, s *mcpStack, ws, name, module, config string) string {
	t.Helper()
	st, err := s.env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws, Definition: workflow.Definition{
		Name: name,
		Components: []workflow.Component{{ID: "start", Module: workflow.ModuleTrigger},
			{ID: "work", Module: module, Config: json.RawMessage(config)}},
		Edges: []workflow.Edge{{From: "start", To: "work"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return st.ID
}

func TestMCPWorkflowTools(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := s.env.Workspace(t, 100)
	echoWF := workflowOf(t, s, ws, "greet", "core.echo", `{}`)
	slowWF := workflowOf(t, s, ws, "slow", "core.delay", `{"ms":10000}`)
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.connect(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	testenv.Eventually(t, 30*time.Second, "list_workflows to show both workflows", func() bool {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "list_workflows", Arguments: map[string]any{"limit": 10}})
		if err != nil || res.IsError {
			return false
		}
		b, _ := json.Marshal(res.StructuredContent)
		return strings.Contains(string(b), `"total":2`) && strings.Contains(string(b), echoWF) && strings.Contains(string(b), `"name":"greet"`)
	})

	trig := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_workflow", Arguments: map[string]any{
		"workflowId": echoWF, "input": map[string]any{"hi": "there"}, "waitForMs": 30000}}))
	runs, _ := trig["runs"].([]any)
	if len(runs) != 1 {
		t.Fatalf("trigger_workflow: %v", trig)
	}
	entry := runs[0].(map[string]any)
	detail, _ := entry["run"].(map[string]any)
	stages, _ := detail["runStages"].([]any)
	b, _ := json.Marshal(stages)
	if entry["runId"] == "" || entry["jobId"] == "" || detail["status"] != "COMPLETED" || detail["id"] != entry["runId"] ||
		!strings.Contains(string(b), `"hi":"there"`) || detail["totalUsage"] != float64(1) {
		t.Fatalf("trigger_workflow with waiting: %v", trig)
	}
	runID := fmt.Sprint(entry["runId"])
	got := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_run", Arguments: map[string]any{"runId": runID}}))
	if got["id"] != runID || got["status"] != "COMPLETED" {
		t.Fatalf("get_run: %v", got)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "cancel_run", Arguments: map[string]any{"runId": runID}})
	wantToolError(t, res, err, "already ended")

	// A run that is still going can be cancelled: it ends FAILED with cancelRequestedAt set.
	slow := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_workflow", Arguments: map[string]any{"workflowId": slowWF}}))
	slowRun := slow["runs"].([]any)[0].(map[string]any)
	if st := slowRun["run"].(map[string]any)["status"]; st == "COMPLETED" || st == "FAILED" {
		t.Fatalf("a run returned without waiting has ended already: %v", slow)
	}
	canceled := structured(t)(sess.CallTool(ctx, &mcp.CallToolParams{Name: "cancel_run", Arguments: map[string]any{
		"runId": slowRun["runId"], "reason": "not needed"}}))
	if canceled["status"] != "FAILED" || canceled["cancelRequestedAt"] == nil || canceled["cancelReason"] != "not needed" {
		t.Fatalf("cancel_run: %v", canceled)
	}

	t.Run("errors", func(t *testing.T) {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_workflow", Arguments: map[string]any{"workflowId": "00000000-0000-4000-8000-000000000000"}})
		wantToolError(t, res, err, "not found")
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_workflow", Arguments: map[string]any{"workflowId": echoWF, "waitForMs": MaxRunWaitMsPlusOne}})
		wantToolError(t, res, err, "waitForMs")
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_workflow", Arguments: map[string]any{"workflowId": echoWF, "input": []int{1}}})
		wantToolError(t, res, err, "input")
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_run", Arguments: map[string]any{}})
		wantToolError(t, res, err, "runId")

		// Another workspace sees neither the workflow nor its runs.
		other := s.env.Workspace(t, 10)
		otherTok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: other})
		if err != nil {
			t.Fatal(err)
		}
		otherSess, err := s.connect(ctx, otherTok.Token)
		if err != nil {
			t.Fatal(err)
		}
		defer otherSess.Close()
		res, err = otherSess.CallTool(ctx, &mcp.CallToolParams{Name: "get_run", Arguments: map[string]any{"runId": runID}})
		wantToolError(t, res, err, "not found")
		res, err = otherSess.CallTool(ctx, &mcp.CallToolParams{Name: "cancel_run", Arguments: map[string]any{"runId": slowRun["runId"]}})
		wantToolError(t, res, err, "not found")
		res, err = otherSess.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_workflow", Arguments: map[string]any{"workflowId": echoWF}})
		wantToolError(t, res, err, "not found")
		list := structured(t)(otherSess.CallTool(ctx, &mcp.CallToolParams{Name: "list_workflows"}))
		if list["total"] != float64(0) {
			t.Fatalf("the other workspace lists %v", list)
		}
	})
}

// MaxRunWaitMsPlusOne is just past trigger_workflow's longest wait.
const MaxRunWaitMsPlusOne = httpapi.MaxRunWaitMs + 1
