package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/testenv"
)

// FuzzRouteInputs sends every route of the service, as serve mounts it (httpapi.Routes over a
// real database), two inputs it does not control: query, the raw query string of every GET
// route (every paginated list and every filter among them) with valid ids in its path; and id,
// put in turn into each path variable of every route, the others valid. Each request carries
// the credentials its route wants (a signed API key, a session bearer, the session cookie), so
// the input reaches the handler rather than a 401.
//
// Property: no answer is a 5xx. Bad input is the caller's fault, answered 4xx.
//
// The seeds (the issue 26 reports among them) run as a plain test; new crashers go to
// testdata/fuzz/FuzzRouteInputs.
func FuzzRouteInputs(f *testing.F) {
	for _, seed := range [][2]string{
		{"page=9223372036854775807", "\x00"},
		{"page=9223372036854775807&limit=100", "\xff"},
		{"limit=9223372036854775807", "not-a-uuid"},
		{"page=-1&limit=0", "00000000-0000-0000-0000-000000000000"},
		{"page=1e3&limit=%20", "%"},
		{"module=%00", "ws-\x00"},
		{"workflow=%ff", "\xed\xa0\x80"},
		{"status=%00&workflow=%00&module=%ff&q=%00", strings.Repeat("a", 5000)},
		{"status=NOPE&workflow=not-a-uuid", ".."},
		{"page=2&limit=1&page=3", "{workspaceId}"},
		{"%zz=1&page", "x y"},
	} {
		f.Add(seed[0], seed[1])
	}
	s := newRouteFuzzStack(f)
	f.Fuzz(func(t *testing.T, query, id string) {
		for _, rt := range s.routes {
			if rt.method == http.MethodGet {
				s.check(t, rt, rt.path(s.ids, "", ""), query)
			}
			for _, v := range rt.vars {
				s.check(t, rt, rt.path(s.ids, v, id), "")
			}
		}
	})
}

// FuzzRouteBodies sends every route that takes a body (POST, PUT, PATCH), as serve mounts it,
// one body it does not control, as JSON, with valid ids in its path and the credentials its route
// wants (an SDK request signed over the body). DELETE and /logout are left out: they would end
// the fixtures the other routes need, whatever the body.
//
// Property: no answer is a 5xx. A body the route cannot use is the caller's fault, answered 4xx.
func FuzzRouteBodies(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `[]`, `{}`, `"x"`, `0`, `-1e400`, `{"a":1,"a":2}`, `{"":1}`, `{"name":null}`,
		`{"name":"\u0000","label":"\ud800"}`, "{\"name\":\"\xff\xfe\"}", `{"input":` + strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001) + `}`,
		`{"module":"core.echo","input":{},"config":{},"waitForMs":9223372036854775807}`,
		`{"components":[{"id":"a","module":"ON_API_CALLED"},{"id":"a","module":"core.echo"}],"edges":[{"from":"a","to":"a"}]}`,
		`{"redirectUris":["javascript:alert(1)"],"scopes":[null],"name":1}`,
		`{"allowedWorkflowIds":[null,1,{}],"label":"` + strings.Repeat("x", 100000) + `"}`,
		`{"runs":[` + strings.Repeat(`{},`, 2000) + `{}]}`,
		`{"grant_type":"authorization_code","code":"\u0000"}`,
		`{"taskId":"00000000-0000-0000-0000-000000000000","output":1e309}`,
	} {
		f.Add(seed)
	}
	s := newRouteFuzzStack(f)
	f.Fuzz(func(t *testing.T, body string) {
		for _, rt := range s.routes {
			if rt.takesBody() {
				s.checkBody(t, rt, rt.path(s.ids, "", ""), "", body)
			}
		}
	})
}

// takesBody reports whether FuzzRouteBodies sends the route bodies.
func (r fuzzRoute) takesBody() bool {
	switch r.method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return r.template != "/logout"
	}
	return false
}

// fuzzRoute is one route and method of the router.
type fuzzRoute struct {
	method, template string
	vars             []string
}

var pathVar = regexp.MustCompile(`\{([^:}]+)(?::([^}]*))?\}`)

// path fills the template with valid ids, and with value for the variable named fuzzed; each
// segment is escaped as a client would, so the value stays one segment on the wire.
func (r fuzzRoute) path(ids map[string]string, fuzzed, value string) string {
	return pathVar.ReplaceAllStringFunc(r.template, func(m string) string {
		sub := pathVar.FindStringSubmatch(m)
		name, pattern := sub[1], sub[2]
		switch {
		case name == fuzzed:
			return url.PathEscape(value)
		case ids[name] != "":
			return url.PathEscape(ids[name])
		case pattern != "":
			return strings.Split(pattern, "|")[0] // a literal alternative: submit|secret
		}
		return ids["*"]
	})
}

// routeFuzzStack is the apiStack with what the fuzz target's requests carry: a session, and
// real ids of each kind of path variable.
type routeFuzzStack struct {
	*apiStack
	handler http.Handler
	routes  []fuzzRoute
	ids     map[string]string
	session string
	secret  []byte
	nonce   atomic.Int64
}

func newRouteFuzzStack(tb testing.TB) *routeFuzzStack {
	tb.Helper()
	s := &routeFuzzStack{apiStack: newAPIStack(tb)}
	s.handler = s.server.Handler()
	key, err := client.ParseSecret(s.key.APISecret)
	if err != nil {
		tb.Fatal(err)
	}
	s.secret = key
	resp, body := s.call(tb, http.MethodPost, "/v1/auth/login", `{"email":"`+s.email+`","password":"`+stackPassword+`"}`)
	var login struct{ Token string }
	if err := json.Unmarshal(body, &login); err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("sign in: %d %s", resp.StatusCode, body)
	}
	s.session = login.Token
	s.ids = s.realIDs(tb)
	if err := s.server.Router.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil || route.GetHandler() == nil {
			return nil // a subrouter's prefix
		}
		methods, _ := route.GetMethods()
		if len(methods) == 0 {
			methods = []string{http.MethodGet}
		}
		var vars []string
		for _, m := range pathVar.FindAllStringSubmatch(tpl, -1) {
			vars = append(vars, m[1])
		}
		for _, m := range methods {
			if m != http.MethodHead {
				s.routes = append(s.routes, fuzzRoute{method: m, template: tpl, vars: vars})
			}
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return s
}

// realIDs makes one of each thing a path names, finished where it could stream (a stream of a
// finished run or execution ends at once), and returns the ids by path variable name.
func (s *routeFuzzStack) realIDs(tb testing.TB) map[string]string {
	tb.Helper()
	ctx := context.Background()
	bearer := []string{"Authorization", "Bearer " + s.session}
	ws := "/v1/workspaces/" + s.ws
	def := `{"name":"fuzz-flow","components":[{"id":"start","module":"ON_API_CALLED","position":[0,0]},` +
		`{"id":"echo","module":"core.echo","config":{},"position":[200,0]}],"edges":[{"from":"start","to":"echo"}]}`
	wf := s.created(tb, ws+"/workflows", def, bearer)
	token := s.created(tb, ws+"/mcp-tokens", `{"label":"fuzz"}`, bearer)
	app := s.created(tb, "/v1/developer/apps", `{"name":"Fuzz App","description":"d","logoUrl":"",`+
		`"redirectUris":["https://app.example.com/cb"],"scopes":["openid","workspace:read"]}`, bearer)
	resp, body := s.sdkCall(tb, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{},"config":{},"waitForMs":10000}`)
	var exec struct{ ID, Status string }
	if err := json.Unmarshal(body, &exec); err != nil || exec.Status != "COMPLETED" {
		tb.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	runs, err := s.env.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: s.ws, WorkflowID: wf["id"].(string), Input: json.RawMessage(`{}`)})
	if err != nil || len(runs) != 1 {
		tb.Fatalf("trigger: %v %v", runs, err)
	}
	testenv.Eventually(tb, 30*time.Second, "the run to finish", func() bool {
		st, err := s.env.Cmds.Workflows.Run(ctx, runs[0].RunID)
		return err == nil && st.Status == run.StatusCompleted
	})
	for _, p := range []string{"runs", "executions", "billing", "workflowlist"} {
		s.env.CaughtUp(tb, p)
	}
	return map[string]string{
		"workspaceId": s.ws, "workflowId": wf["id"].(string), "componentId": "echo",
		"executionId": exec.ID, "runId": runs[0].RunID, "tokenId": token["id"].(string),
		"clientId": app["clientId"].(string), "keyId": s.key.ID, "file": "console.css",
		"*": uuid.NewString(), // any other variable: an id of nothing
	}
}

// created posts body with the session and returns the 201's JSON object.
func (s *routeFuzzStack) created(tb testing.TB, path, body string, headers []string) map[string]any {
	tb.Helper()
	resp, b := s.call(tb, http.MethodPost, path, body, headers...)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != http.StatusCreated {
		tb.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return m
}

// check sends one request and fails on a 5xx. A target no HTTP/1.1 server would read (a space
// or a control byte in the query) is not sent: net/http refuses it before any route.
func (s *routeFuzzStack) check(t *testing.T, rt fuzzRoute, path, query string) {
	t.Helper()
	s.checkBody(t, rt, path, query, "")
}

// checkBody is check with a JSON body.
func (s *routeFuzzStack) checkBody(t *testing.T, rt fuzzRoute, path, query, body string) {
	t.Helper()
	target := path
	if query != "" {
		target += "?" + query
	}
	if rt.method != http.MethodGet && strings.HasPrefix(path, "/v1/sdk/") {
		// Two identical signed POSTs within a second are a replay (SPEC.md 5): vary them.
		target += map[bool]string{true: "&", false: "?"}[query != ""] + "nonce=" + strconv.FormatInt(s.nonce.Add(1), 10)
	}
	head := rt.method + " " + target + " HTTP/1.1\r\nHost: switchyard.test\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head + body)))
	if err != nil {
		return
	}
	req.RemoteAddr = "192.0.2.1:4711"
	s.authenticate(req, path, []byte(body))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req.WithContext(ctx))
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not answer within 30s", rt.method, target)
	}
	if rec.Code >= 500 {
		body := rec.Body.String()
		t.Errorf("%s %q (route %s): %d %.300s", rt.method, target, rt.template, rec.Code, body)
	}
}

// authenticate adds what the route's family asks: the signed API key (SDK), the session as
// bearer (the other /v1 routes) or as cookie (pages). The MCP token is left out: /v1/mcp takes
// no path id or query.
func (s *routeFuzzStack) authenticate(req *http.Request, path string, body []byte) {
	switch {
	case strings.HasPrefix(path, "/v1/sdk/"):
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("X-Api-Key", s.key.APIKey)
		req.Header.Set("X-Sdk-Timestamp", ts)
		req.Header.Set("X-Sdk-Signature", client.Sign(s.secret, req.Method, req.RequestURI, ts, body))
	case strings.HasPrefix(path, "/v1/"):
		req.Header.Set("Authorization", "Bearer "+s.session)
	default:
		req.Header.Set("Accept", "text/html")
		req.AddCookie(&http.Cookie{Name: identity.SessionCookie, Value: s.session})
	}
}
