package httpapi_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/console"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/internal/browsertest"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/server"
	"github.com/switchyard/switchyard/testenv"
)

// dashStack is the dashboard side of the service in process: real Postgres, projections,
// scheduler, live hub, identity provider (sign-in) and the run page. The executor is started
// by the test when it wants stages to progress.
type dashStack struct {
	core testCore
	env  *testenv.Env
	hub  *livehub.Hub
	srv  *httptest.Server
	log  logrus.FieldLogger
}

const dashPassword = "dashboard-password-1"

func newDashStack(t *testing.T) *dashStack {
	t.Helper()
	core := newTestCore(t, false)
	env, hub, log := core.env, core.hub, core.log
	key, _ := seal.GenerateKey()
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	idp, err := identity.New(identity.Config{Issuer: srv.URL, Cmds: env.Cmds, Queries: env.Queries, Sealer: sealer, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := idp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	routes, err := server.Routes(server.RoutesConfig{Server: httpapi.ServerConfig{Logger: log}, Cmds: env.Cmds, Queries: env.Queries,
		Hub: hub, Identity: idp})
	if err != nil {
		t.Fatal(err)
	}
	handler = routes.Handler()
	return &dashStack{core: core, env: env, hub: hub, srv: srv, log: log}
}

// startExecutor lets the run's stages progress from now on.
func (s *dashStack) startExecutor(t *testing.T) { s.core.startExecutor(t) }

// user registers a user owning a new workspace with credits; it returns the email and the
// workspace id.
func (s *dashStack) user(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	email := fmt.Sprintf("dash-%s@example.com", uuid.NewString()[:8])
	if _, err := s.env.Cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: dashPassword, Name: "Dash User"}); err != nil {
		t.Fatal(err)
	}
	ws, err := s.env.Cmds.Workspaces.CreateWorkspace(ctx, "dash-"+uuid.NewString()[:8], email)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.env.Cmds.Billing.TopUp(ctx, ws, billing.FromWhole(100), ""); err != nil {
		t.Fatal(err)
	}
	return email, ws
}

// session signs in through POST /v1/auth/login and returns the session JWT, which is what the
// browser's session cookie holds.
func (s *dashStack) session(t *testing.T, email string) string {
	t.Helper()
	resp, err := http.Post(s.srv.URL+"/v1/auth/login", "application/json",
		strings.NewReader(fmt.Sprintf(`{"email": %q, "password": %q}`, email, dashPassword)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.Token == "" {
		t.Fatalf("sign in: %d %v", resp.StatusCode, err)
	}
	return body.Token
}

// dashRunWorkflow is a trigger, one module stage, then a FOR_EACH over the input's items with
// a one-component body: the page shows plain nodes and loop counts.
const dashRunWorkflow = `{"name": "dashboard-%s", "components": [
	{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 40]},
	{"id": "a", "name": "Prepare", "module": "core.echo", "position": [260, 40]},
	{"id": "each", "name": "Each item", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 2}, "position": [520, 40]},
	{"id": "work", "name": "Work", "module": "core.echo", "position": [780, 40]}],
  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item"}}]}`

// startRun creates the workflow in ws, triggers it with n items and waits until its first
// module stage is dispatched.
func (s *dashStack) startRun(t *testing.T, ws string, n int) string {
	t.Helper()
	ctx := context.Background()
	var def workflow.Definition
	if err := json.Unmarshal(fmt.Appendf(nil, dashRunWorkflow, uuid.NewString()[:8]), &def); err != nil {
		t.Fatal(err)
	}
	wf, err := s.env.Cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: def})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	runs, err := s.env.Cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf.ID,
		Input: json.RawMessage(`{"items": [` + strings.Join(items, ",") + `]}`)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("trigger: %v %v", runs, err)
	}
	id := runs[0].RunID
	testenv.Eventually(t, 30*time.Second, "stage a to be dispatched", func() bool {
		st, err := s.env.Cmds.Workflows.Run(ctx, id)
		return err == nil && len(st.Stages) >= 2
	})
	return id
}

func (s *dashStack) waitRunEnded(t *testing.T, id string) run.State {
	t.Helper()
	var st run.State
	testenv.Eventually(t, 60*time.Second, "run "+id+" to end", func() bool {
		var err error
		st, err = s.env.Cmds.Workflows.Run(context.Background(), id)
		return err == nil && st.Status.Terminal()
	})
	return st
}

// get requests path with the session cookie (none when token is ""), not following
// redirects.
func (s *dashStack) get(t *testing.T, path, token string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
	if token != "" {
		req.AddCookie(&http.Cookie{Name: identity.SessionCookie, Value: token})
	}
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func wantErrorBody(t *testing.T, what string, resp *http.Response, body []byte, status int) {
	t.Helper()
	var e httpapi.ErrorBody
	if resp.StatusCode != status || json.Unmarshal(body, &e) != nil || e.StatusCode != status || e.Message == "" {
		t.Errorf("%s: %d %s, want %d with the error body", what, resp.StatusCode, body, status)
	}
}

func TestDashboardRunNeedsASession(t *testing.T) {
	s := newDashStack(t)
	email, ws := s.user(t)
	id := s.startRun(t, ws, 1)
	base := "/dashboard/runs/" + id

	resp, _ := s.get(t, base, "")
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/login?return_to="+url.QueryEscape(base) {
		t.Fatalf("page without a session: %d to %q, want 303 to the sign-in page and back", resp.StatusCode, loc)
	}
	for _, token := range []string{"", "not-a-jwt"} {
		for _, p := range []string{base + "/detail", base + "/stream"} {
			resp, body := s.get(t, p, token)
			wantErrorBody(t, p+" with cookie "+token, resp, body, http.StatusUnauthorized)
		}
	}
	// A session that ended (signed out) no longer opens the page.
	token := s.session(t, email)
	if resp, _ := s.get(t, base+"/detail", token); resp.StatusCode != http.StatusOK {
		t.Fatalf("detail with a live session: %d", resp.StatusCode)
	}
	parts := strings.Split(token, ".")
	var claims struct {
		SID string `json:"sid"`
	}
	if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err != nil || json.Unmarshal(raw, &claims) != nil || claims.SID == "" {
		t.Fatalf("session JWT without a sid: %v", err)
	}
	if err := s.env.Cmds.Identity.EndSession(context.Background(), claims.SID); err != nil {
		t.Fatal(err)
	}
	resp, body := s.get(t, base+"/detail", token)
	wantErrorBody(t, "detail after sign-out", resp, body, http.StatusUnauthorized)
}

func TestDashboardRunOfAnotherWorkspaceIsNotFound(t *testing.T) {
	s := newDashStack(t)
	_, ws := s.user(t)
	outsider, _ := s.user(t)
	id := s.startRun(t, ws, 1)
	token := s.session(t, outsider)
	base := "/dashboard/runs/" + id

	resp, body := s.get(t, base, token)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "Run not found") {
		t.Fatalf("page of another workspace's run: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{base + "/detail", base + "/stream", "/dashboard/runs/" + uuid.NewString() + "/detail",
		"/dashboard/runs/" + uuid.NewString() + "/stream", "/dashboard/runs/not-a-uuid/detail", "/dashboard/runs/not-a-uuid/stream"} {
		resp, body := s.get(t, p, token)
		wantErrorBody(t, p, resp, body, http.StatusNotFound)
	}

	// Once a member (any role), the same user sees it.
	if err := s.env.Cmds.Workspaces.AddMember(context.Background(), ws, outsider, "member"); err != nil {
		t.Fatal(err)
	}
	if resp, body := s.get(t, base+"/detail", token); resp.StatusCode != http.StatusOK {
		t.Fatalf("detail for a member: %d %s", resp.StatusCode, body)
	}
}

func TestDashboardRunDetailAndStream(t *testing.T) {
	s := newDashStack(t)
	email, ws := s.user(t)
	id := s.startRun(t, ws, 3)
	token := s.session(t, email)
	base := "/dashboard/runs/" + id

	// In progress: the trigger completed, stage a waits for an executor, the rest not reached.
	resp, body := s.get(t, base+"/detail", token)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("detail: %d %s", resp.StatusCode, body)
	}
	var d console.RunDetail
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, c := range d.Components {
		statuses[c.ID] = c.Status
	}
	if d.ID != id || d.Status != run.StatusExecuting || len(d.Components) != 4 || len(d.Edges) != 3 ||
		statuses["t"] != "COMPLETED" || statuses["a"] != "CREATED" || statuses["each"] != "NOT_STARTED" || statuses["work"] != "NOT_STARTED" {
		t.Fatalf("detail in progress: status %s, components %v, %d edges", d.Status, statuses, len(d.Edges))
	}

	// The stream of a run in progress: the current state at once.
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+base+"/stream", nil)
	req.AddCookie(&http.Cookie{Name: identity.SessionCookie, Value: token})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK || !strings.HasPrefix(stream.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", stream.StatusCode, stream.Header.Get("Content-Type"))
	}
	events := make(chan run.StreamEvent, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stream.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev run.StreamEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					events <- ev
				}
			}
		}
	}()
	first, ok := <-events
	if !ok || first.ID != id || first.Status != run.StatusExecuting || first.Output.PendingStageCount != 1 {
		t.Fatalf("first stream event: %+v", first)
	}

	// Progress arrives on the stream, ending with COMPLETED, after which it closes.
	s.startExecutor(t)
	var last run.StreamEvent
	for ev := range events {
		last = ev
	}
	if last.Status != run.StatusCompleted {
		t.Fatalf("last stream event %+v, want COMPLETED before the stream closed", last)
	}

	// The finished run's detail: each component's status and counts, the loop's item count.
	resp, body = s.get(t, base+"/detail", token)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("detail: %d %s", resp.StatusCode, body)
	}
	for _, k := range []string{"id", "workflowId", "status", "pendingStageCount", "failedStageCount", "cancelRequestedAt",
		"cancelReason", "totalUsage", "createdAt", "updatedAt", "runStages", "workflowName", "components", "edges"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("detail has no %s", k)
		}
	}
	var comps []map[string]json.RawMessage
	_ = json.Unmarshal(raw["components"], &comps)
	for _, c := range comps {
		for _, k := range []string{"id", "name", "module", "position", "attempts", "status", "counts", "iterations"} {
			if _, ok := c[k]; !ok {
				t.Errorf("component %s has no %s", c["id"], k)
			}
		}
		if _, ok := c["config"]; ok {
			t.Errorf("component %s carries its config", c["id"])
		}
	}
	d = console.RunDetail{}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	byID := map[string]console.RunComponent{}
	for _, c := range d.Components {
		byID[c.ID] = c
	}
	work, each, a := byID["work"], byID["each"], byID["a"]
	if d.Status != run.StatusCompleted || d.PendingStageCount != 0 || len(d.RunStages) != 6 || d.WorkflowName == "" {
		t.Fatalf("finished detail: %s, %d pending, %d stages", d.Status, d.PendingStageCount, len(d.RunStages))
	}
	if work.Status != "COMPLETED" || work.ForEach != "each" || work.Iterations == nil || *work.Iterations != 3 ||
		work.Counts != (console.StageCounts{Completed: 3}) {
		t.Fatalf("body component: %+v", work)
	}
	if each.Status != "COMPLETED" || each.Iterations == nil || *each.Iterations != 3 || each.IterationsDone == nil || *each.IterationsDone != 3 {
		t.Fatalf("FOR_EACH component: %+v", each)
	}
	if a.Status != "COMPLETED" || a.Position != (workflow.Position{260, 40}) || a.Counts.Completed != 1 || a.Iterations != nil {
		t.Fatalf("component a: %+v", a)
	}

	// A finished run's stream sends its terminal state and closes (SPEC.md 6.2).
	resp, body = s.get(t, base+"/stream", token)
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), "data: ") != 1 || !strings.Contains(string(body), `"status":"COMPLETED"`) {
		t.Fatalf("stream of a finished run: %d %s", resp.StatusCode, body)
	}

	// The page: server-rendered with its own script, under a CSP that allows no inline script.
	resp, body = s.get(t, base, token)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-run-id="`+id+`"`) ||
		!strings.Contains(string(body), `<script src="/console/static/run.js?v=`) || !strings.Contains(csp, "script-src 'self'") ||
		strings.Contains(csp, "unsafe-inline") || strings.Count(string(body), "<tr data-stage-id=") != 6 {
		t.Fatalf("page: %d, CSP %q\n%s", resp.StatusCode, csp, body)
	}
	for _, asset := range []string{"/console/static/run.js", "/console/static/run.css"} {
		if resp, body := s.get(t, asset, ""); resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("%s: %d", asset, resp.StatusCode)
		}
	}
}

func TestDashboardRunCancelled(t *testing.T) {
	s := newDashStack(t)
	email, ws := s.user(t)
	id := s.startRun(t, ws, 2)
	if _, err := s.env.Cmds.Workflows.CancelRun(context.Background(), id, "not needed <any more>"); err != nil {
		t.Fatal(err)
	}
	token := s.session(t, email)
	resp, body := s.get(t, "/dashboard/runs/"+id+"/detail", token)
	var d console.RunDetail
	if err := json.Unmarshal(body, &d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("detail: %d %s", resp.StatusCode, body)
	}
	statuses := map[string]string{}
	for _, c := range d.Components {
		statuses[c.ID] = c.Status
	}
	if d.Status != run.StatusFailed || d.CancelRequestedAt == nil || d.CancelReason == nil || *d.CancelReason != "not needed <any more>" ||
		statuses["t"] != "COMPLETED" || statuses["a"] != console.StatusCanceled || statuses["each"] != "NOT_STARTED" ||
		d.DisplayStatus != console.StatusCanceled || d.CanceledStageCount != 1 || d.ErrorText != "Canceled: not needed <any more>" {
		t.Fatalf("cancelled run: %s, cancel %v %v, components %v", d.Status, d.CancelRequestedAt, d.CancelReason, statuses)
	}
	// The page shows the cancellation, with the reason escaped: canceled, though the API says
	// FAILED (SPEC.md 3).
	resp, body = s.get(t, "/dashboard/runs/"+id, token)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "not needed &lt;any more&gt;") ||
		!strings.Contains(string(body), `data-status="CANCELED"`) {
		t.Fatalf("page of a cancelled run: %d\n%s", resp.StatusCode, body)
	}
}

// TestDashboardRunPageInBrowser drives a real Chromium: sign in, open the page of a run whose
// first module stage waits for an executor, start one, and watch the node turn from CREATED
// grey to COMPLETED green and the run finish, with no reload of the page.
func TestDashboardRunPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser; skipped with -short")
	}
	chrome := browsertest.Chromium(t)
	s := newDashStack(t)
	email, ws := s.user(t)
	id := s.startRun(t, ws, 5)

	opts := browsertest.Options(chrome, 1280, 1000)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancel := context.WithTimeout(bctx, 120*time.Second)
	defer cancel()

	node := func(c string) string { return `#graph g[data-component="` + c + `"]` }
	// fillOnce polls until the node has status, then yields its rect's computed fill.
	fillOnce := func(c, status string, fill *string) chromedp.Action {
		return chromedp.Poll(fmt.Sprintf(`(() => { const g = document.querySelector(%q);
			return g && g.getAttribute('data-status') === %q ? getComputedStyle(g.querySelector('rect')).fill : false })()`, node(c), status),
			fill, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second))
	}
	var before, after, runStatus, counts, live string
	var marker bool
	var early []byte
	err := chromedp.Run(bctx,
		chromedp.Navigate(s.srv.URL+"/dashboard/runs/"+id),
		// Not signed in: the sign-in page, then back to the run.
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, email, chromedp.ByID),
		chromedp.SendKeys(`#password`, dashPassword, chromedp.ByID),
		chromedp.Click(`button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitReady(`#run-page`, chromedp.ByID),
		fillOnce("a", "CREATED", &before),
		chromedp.FullScreenshot(&early, 100),
		// A page load would clear this; it must survive until the run ends.
		chromedp.Evaluate(`window.__sameDocument = true`, nil),
	)
	if err != nil {
		t.Fatalf("browser, before progress: %v", err)
	}
	s.startExecutor(t)
	var shot []byte
	err = chromedp.Run(bctx,
		fillOnce("a", "COMPLETED", &after),
		chromedp.Poll(`document.getElementById('run-status').getAttribute('data-status') === 'COMPLETED' &&
			document.querySelector('#graph g[data-component="work"]').getAttribute('data-status') === 'COMPLETED' &&
			document.getElementById('live').textContent === 'Finished'`, nil,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Evaluate(`window.__sameDocument === true`, &marker),
		chromedp.Text(`#run-status`, &runStatus, chromedp.ByID),
		chromedp.Evaluate(`document.querySelector('#graph g[data-component="work"] text.counts').textContent`, &counts),
		chromedp.Text(`#live`, &live, chromedp.ByID),
		chromedp.FullScreenshot(&shot, 100), // quality 100: PNG
	)
	if err != nil {
		t.Fatalf("browser, after progress: %v", err)
	}
	if before != "rgb(208, 213, 221)" || after != "rgb(22, 163, 74)" {
		t.Fatalf("node a filled %q while CREATED and %q once COMPLETED, want grey then green", before, after)
	}
	if !marker {
		t.Fatal("the page reloaded instead of updating in place")
	}
	if runStatus != "COMPLETED" || counts != "5/5 done" {
		t.Fatalf("run status %q, loop body counts %q", runStatus, counts)
	}
	if st := s.waitRunEnded(t, id); st.Status != run.StatusCompleted {
		t.Fatalf("run %s", st.Status)
	}
	path := filepath.Join(browsertest.ArtifactsDir(t), "run-page.png")
	for file, png := range map[string][]byte{path: shot, filepath.Join(browsertest.ArtifactsDir(t), "run-page-in-progress.png"): early} {
		if len(png) < 8 || string(png[1:4]) != "PNG" {
			t.Fatalf("screenshot %s of %d bytes is not a PNG", file, len(png))
		}
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("run page (%s) saved to %s", live, path)
}
