package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpTokenHeader adds X-Mcp-Token to every request of the MCP client, as a client configured
// with custom headers (Claude Desktop's "headers", for example) does.
type mcpTokenHeader struct{ token string }

func (h mcpTokenHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Mcp-Token", h.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPBlackBox mints a token with the CLI and drives the served binary's /v1/mcp with the
// go-sdk MCP client, then revokes the token with the CLI.
func TestMCPBlackBox(t *testing.T) {
	svc := startSDKService(t, 100)
	ws := svc.key.WorkspaceID
	var minted struct {
		ID, Token, WorkspaceID, Label string
	}
	svc.cli.okJSON(&minted, "admin", "mcp-token", "create", "--workspace", ws, "--label", "e2e", "--json")
	if !strings.HasPrefix(minted.Token, "mcp_"+minted.ID+"_") || minted.WorkspaceID != ws || minted.Label != "e2e" {
		t.Fatalf("mcp-token create printed %+v", minted)
	}
	res := svc.cli.ok("admin", "mcp-token", "list", "--workspace", ws, "--json")
	if !strings.Contains(res.stdout, minted.ID) || strings.Contains(res.stdout, minted.Token) || !strings.Contains(res.stdout, `"total": 1`) {
		t.Fatalf("mcp-token list: %s", res)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
	sess, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: svc.cli.url("/v1/mcp"), MaxRetries: -1,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: mcpTokenHeader{token: minted.Token}}}, nil)
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
	}
	for _, want := range []string{"list_modules", "execute_component", "get_execution", "get_balance",
		"list_workflows", "trigger_workflow", "get_run", "cancel_run"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}
	call, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_component", Arguments: map[string]any{
		"module": "core.echo", "input": map[string]any{"via": "mcp"}, "config": map[string]any{}, "waitForMs": 15000}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(call.StructuredContent)
	var rec map[string]any
	_ = json.Unmarshal(b, &rec)
	if call.IsError || rec["status"] != "COMPLETED" || rec["totalUsage"] != float64(1) {
		t.Fatalf("execute_component: %s", b)
	}

	var revoked map[string]any
	svc.cli.okJSON(&revoked, "admin", "mcp-token", "revoke", "--workspace", ws, "--id", minted.ID, "--json")
	if revoked["revoked"] != true || revoked["id"] != minted.ID {
		t.Fatalf("mcp-token revoke printed %v", revoked)
	}
	req, _ := http.NewRequest(http.MethodPost, svc.cli.url("/v1/mcp"),
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_balance"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Mcp-Token", minted.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"statusCode":401`) {
		t.Fatalf("a revoked token on /v1/mcp: %d %s", resp.StatusCode, body)
	}
	// A token cannot be revoked through another workspace.
	if r := svc.cli.run("admin", "mcp-token", "revoke", "--workspace", "00000000-0000-4000-8000-000000000000", "--id", minted.ID); r.code == 0 {
		t.Fatalf("revoke through another workspace succeeded: %s", r)
	}
	res = svc.cli.ok("admin", "mcp-token", "list", "--workspace", ws)
	if !strings.Contains(res.stdout, "revoked") {
		t.Fatalf("mcp-token list after revoke: %s", res)
	}
}
