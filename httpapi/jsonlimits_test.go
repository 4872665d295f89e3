package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	httpapi "github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
)

// eventsIn counts the events of the core's store.
func eventsIn(t *testing.T, s *guardStack) int {
	t.Helper()
	var n int
	if err := s.core.env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantRefusal checks a 400 whose message starts with the field it names.
func wantRefusal(t *testing.T, what string, status int, body []byte, field string) {
	t.Helper()
	var e struct{ Message string }
	if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || !strings.HasPrefix(e.Message, field) {
		t.Fatalf("%s: %d %.300s, want a 400 naming %s", what, status, body, field)
	}
}

// Issue 26 items 3, 8 and 9: every JSON body is checked as it was sent, with one rule: nesting
// past domain.MaxJSONDepth, numbers PostgreSQL's numeric cannot hold and text jsonb cannot store
// (a lone surrogate included, which decoding would have replaced) are a 400 naming the field,
// and nothing is written.
func TestBodiesAreCheckedAsSent(t *testing.T) {
	s := newGuardStack(t, httpapi.SDKAuthConfig{})
	ws := s.core.env.Workspace(t, 100)
	wf := slowWorkflow(t, s, ws, "checked")
	key := s.key(t, ws)
	nested := strings.Repeat("[", 9990) + strings.Repeat("]", 9990) // issue 26: a 20 KB submit, a 399 MB page
	submit := func(input string) string {
		return `{"module":"core.echo","config":{},"input":` + input + `}`
	}
	for _, tc := range []struct{ name, path, body, field string }{
		{"submit nested 9990 deep", "/v1/sdk/components", submit(`{"a":` + nested + `}`), "input"},
		{"submit nested one level too deep", "/v1/sdk/components", submit(`{"a":` + strings.Repeat("[", 127) + strings.Repeat("]", 127) + `}`), "input"},
		{"submit config nested too deep", "/v1/sdk/components", `{"module":"core.echo","input":{},"config":{"a":` + nested + `}}`, "config"},
		{"submit 1e131073", "/v1/sdk/components", submit(`{"n":1e131073}`), "input.n"},
		{"submit a 200000-digit integer", "/v1/sdk/components", submit(`{"n":[` + strings.Repeat("7", 200000) + `]}`), "input.n[0]"},
		{"submit 1e-16384", "/v1/sdk/components", submit(`{"n":1e-16384}`), "input.n"},
		{"submit a lone surrogate in a callback secret", "/v1/sdk/components",
			`{"module":"core.echo","input":{},"config":{},"callbackUrl":"https://example.com/h","callbackSecret":"\ud800"}`, "callbackSecret"},
		{"trigger nested too deep", "/v1/sdk/workflows/" + wf, `{"a":` + nested + `}`, "body"},
		{"trigger 1e999999", "/v1/sdk/workflows/" + wf, `{"n":1e999999}`, "body"},
		{"component name with a lone surrogate", "/v1/sdk/workflows/" + wf + "/components/work", `{"name":"\ud800"}`, "name"},
		{"component config nested too deep", "/v1/sdk/workflows/" + wf + "/components/work", `{"config":{"ms":10,"a":` + nested + `}}`, "config"},
		{"component config 1e131073", "/v1/sdk/workflows/" + wf + "/components/work", `{"config":{"ms":1e131073}}`, "config.ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := eventsIn(t, s)
			resp, body := s.do(t, key, http.MethodPost, tc.path, tc.body)
			wantRefusal(t, tc.name, resp.StatusCode, body, tc.field)
			if after := eventsIn(t, s); after != before {
				t.Fatalf("the refused request appended %d events", after-before)
			}
		})
	}
	// A run is cancelled for a reason given as text jsonb can store, or not at all.
	runID := s.trigger(t, key, wf)
	resp, body := s.do(t, key, http.MethodPost, "/v1/sdk/workflows/executions/"+runID+"/cancel", `{"reason":"\udc00"}`)
	wantRefusal(t, "cancel", resp.StatusCode, body, "reason")
	if st, err := s.core.env.Cmds.Workflows.Run(context.Background(), runID); err != nil || !st.CancelAt.IsZero() {
		t.Fatalf("the refused cancel cancelled the run: %v", err)
	}
	// The rule holds at its bounds: a body nested 128 levels deep (an input of 127) and the
	// widest numbers pass.
	deepest := strings.Repeat("[", 126) + strings.Repeat("]", 126)
	for _, input := range []string{`{"a":` + deepest + `}`, `{"n":1e131071,"m":1e-16383,"z":0e999999}`} {
		if resp, body := s.do(t, key, http.MethodPost, "/v1/sdk/components", submit(input)); resp.StatusCode != http.StatusOK {
			t.Fatalf("submit of %.40s: %d %s", input, resp.StatusCode, body)
		}
	}
	st, err := s.core.env.Cmds.Workflows.Workflow(context.Background(), ws, wf)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := st.Component("work"); c.Name != "work" {
		t.Fatalf("the refused update renamed the component to %q", c.Name)
	}
}

// MCP tool arguments and the workspace endpoints' bodies follow the same rule.
func TestMCPAndWorkspaceBodiesAreCheckedAsSent(t *testing.T) {
	s := newMCPStack(t, 10000, 10000)
	ctx := context.Background()
	ws := s.env.Workspace(t, 100)
	s.bearer["admin"] = identity.Principal{UserID: s.owner(t, ws), ClientID: "app", WorkspaceID: ws, Scopes: []string{identity.ScopeWorkspaceAdmin, identity.ScopeAPIKeys}}
	tok, err := s.env.Cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	wf := workflowOf(t, s, ws, "slow", "core.delay", `{"ms":10000}`)
	runs, err := s.env.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf, Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	nested := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	for _, tc := range []struct{ name, tool, args, want string }{
		{"execute_component nested too deep", "execute_component", `{"module":"core.echo","config":{},"input":{"a":` + nested + `}}`, "invalid arguments: input: must not nest"},
		{"execute_component 1e131073", "execute_component", `{"module":"core.echo","config":{},"input":{"n":1e131073}}`, "invalid arguments: input.n: must not hold"},
		{"trigger_workflow nested too deep", "trigger_workflow", `{"workflowId":"` + wf + `","input":{"a":` + nested + `}}`, "invalid arguments: input: must not nest"},
		{"cancel_run reason with a lone surrogate", "cancel_run", `{"runId":"` + runs[0].RunID + `","reason":"\ud800"}`, "invalid arguments: reason: must not contain a lone"},
	} {
		resp, body := s.rawMCP(t, http.MethodPost, tok.Token, "application/json", toolCall(1, tc.tool, tc.args))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"isError":true`) || !strings.Contains(string(body), tc.want) {
			t.Fatalf("%s: %d %.300s, want a tool error with %q", tc.name, resp.StatusCode, body, tc.want)
		}
	}
	if st, err := s.env.Cmds.Workflows.Run(ctx, runs[0].RunID); err != nil || !st.CancelAt.IsZero() {
		t.Fatalf("the refused cancel_run cancelled the run: %v", err)
	}
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/workspaces/" + ws + "/api-keys", `{"label":"\ud800"}`, "label"},
		{"/v1/workspaces/" + ws + "/mcp-tokens", `{"label":"ok \udfff"}`, "label"},
		{"/v1/workspaces/" + ws + "/modules", `{"name":"acme.x","description":"a\u0000","transport":{"type":"worker"}}`, "description"},
		{"/v1/workspaces/" + ws + "/modules", `{"name":"acme.x","inputSchema":{"a":` + nested + `},"transport":{"type":"worker"}}`, "inputSchema"},
		{"/v1/workspaces/" + ws + "/modules", `{"name":"acme.x","timeoutMs":1e400,"transport":{"type":"worker"}}`, "body: timeoutMs: 1e400 is out of range"},
		{"/v1/workspaces/" + ws + "/modules", `{"name":"acme.x","price":123456789012345678901234567890,"transport":{"type":"worker"}}`, "price"},
		{"/v1/workspaces/" + ws + "/modules", `{"name":"acme.x","concurrency":99999999999999999999,"transport":{"type":"worker"}}`, "body: concurrency: 99999999999999999999 is out of range"},
	} {
		resp, body := s.bearerDo(t, http.MethodPost, tc.path, "admin", tc.body)
		wantRefusal(t, "POST "+tc.path, resp.StatusCode, body, tc.field)
	}
}

// The endpoints of issues 28 and 29 (bulk actions, the worker protocol, workspace modules)
// follow the same rule: deep nesting, numbers numeric cannot hold, NUL and lone surrogates are a
// 400 naming the field, never a 5xx, and nothing is written.
func TestNewEndpointBodiesAreCheckedAsSent(t *testing.T) {
	s := newGuardStack(t, httpapi.SDKAuthConfig{})
	ws := s.core.env.Workspace(t, 100)
	wf := slowWorkflow(t, s, ws, "checked")
	key := s.key(t, ws)
	nested := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	task := "/v1/sdk/tasks/00000000-0000-0000-0000-000000000000.1/"
	run := triggerRunOf(t, s, key, ws)
	for _, tc := range []struct{ name, path, body, field string }{
		{"bulk reason with NUL", "/v1/sdk/workflows/" + wf + "/runs/bulk", `{"action":"cancel","reason":"a\u0000b"}`, "reason"},
		{"bulk reason with a lone surrogate", "/v1/sdk/workflows/" + wf + "/runs/bulk", `{"action":"cancel","reason":"\ud800"}`, "reason"},
		{"bulk filter nested too deep", "/v1/sdk/workflows/" + wf + "/runs/bulk", `{"action":"cancel","filter":{"status":` + nested + `}}`, "body: filter.status"},
		{"bulk huge number", "/v1/sdk/workflows/" + wf + "/runs/bulk", `{"action":"cancel","filter":{"status":1e131073}}`, "body: filter.status"},
		{"poll workerId with NUL", "/v1/sdk/tasks/poll", `{"modules":["acme.x"],"workerId":"w\u0000"}`, "workerId"},
		{"poll max 1e400", "/v1/sdk/tasks/poll", `{"modules":["acme.x"],"max":1e400}`, "max"},
		{"complete output nested too deep", task + "complete", `{"output":{"a":` + nested + `}}`, "output"},
		{"complete output 1e131073", task + "complete", `{"output":{"n":1e131073}}`, "output.n"},
		{"fail message with a lone surrogate", task + "fail", `{"error":{"code":"x","message":"\udc00"}}`, "error.message"},
		{"heartbeat progress with NUL", task + "heartbeat", `{"progress":"\u0000"}`, "progress"},
		// Issue 31: events and signals.
		{"event name with NUL", "/v1/sdk/events", `{"name":"order\u0000paid","id":"e1"}`, "name"},
		{"event payload nested too deep", "/v1/sdk/events", `{"name":"order.paid","id":"e1","payload":{"a":` + nested + `}}`, "payload"},
		{"event payload 1e131073", "/v1/sdk/events", `{"name":"order.paid","id":"e1","payload":{"n":1e131073}}`, "payload.n"},
		{"event id with a lone surrogate", "/v1/sdk/events", `{"name":"order.paid","id":"\ud800"}`, "id"},
		{"signal payload nested too deep", "/v1/sdk/workflows/executions/" + run + "/signals", `{"name":"paid","payload":{"a":` + nested + `}}`, "payload"},
		{"signal payload 1e131073", "/v1/sdk/workflows/executions/" + run + "/signals", `{"name":"paid","payload":{"n":1e131073}}`, "payload.n"},
		{"signal name with NUL", "/v1/sdk/workflows/executions/" + run + "/signals", `{"name":"p\u0000"}`, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := eventsIn(t, s)
			resp, body := s.do(t, key, http.MethodPost, tc.path, tc.body)
			wantRefusal(t, tc.name, resp.StatusCode, body, tc.field)
			if after := eventsIn(t, s); after != before {
				t.Fatalf("the refused request appended %d events", after-before)
			}
		})
	}
}

// triggerRunOf starts a run of a workflow that waits for the signal "paid" for an hour, and
// returns it once it waits: from then on nothing appends to it, so a refused signal is seen to
// append nothing.
func triggerRunOf(t *testing.T, s *guardStack, key commands.APIKeyMinted, ws string) string {
	t.Helper()
	st, err := s.core.env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws,
		Definition: workflow.Definition{Name: "waits for paid",
			Components: []workflow.Component{{ID: "start", Module: workflow.ModuleTrigger},
				{ID: "paid", Module: workflow.ModuleWait, Config: json.RawMessage(`{"signal": {"name": "paid", "timeout": "1h"}}`)}},
			Edges: []workflow.Edge{{From: "start", To: "paid"}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := s.trigger(t, key, st.ID)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := s.core.env.Cmds.Workflows.Run(context.Background(), id)
		if err == nil && slices.ContainsFunc(r.Stages, func(g run.Stage) bool { return g.Waiting != nil }) {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never waited for its signal", id)
		}
	}
}
