package console_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/console"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/internal/browsertest"
	"github.com/switchyard/switchyard/projections"
)

// browser is one Chromium with its own profile (its own cookies), at a window size.
type browser struct {
	t   *testing.T
	s   *stack
	ctx context.Context
	dir string
	who string
}

func (s *stack) browser(t *testing.T, who string, width, height int) *browser {
	t.Helper()
	opts := browsertest.Options(browsertest.Chromium(t), width, height)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	bctx, cancel := context.WithTimeout(bctx, 10*time.Minute) // generous: a busy machine makes every step slow
	t.Cleanup(cancel)
	return &browser{t: t, s: s, ctx: bctx, dir: browsertest.ArtifactsDir(t), who: who}
}

func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	start := time.Now()
	defer func() { b.t.Logf("%s as %s: %s", what, b.who, time.Since(start).Round(time.Millisecond)) }()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s as %s: %v", what, b.who, err)
	}
}

// signIn opens / signed out, which leads to the sign-in form and, after it, to the home.
func (b *browser) signIn(p person) {
	b.t.Helper()
	var heading string
	b.run("sign in",
		chromedp.Navigate(b.s.srv.URL+"/"),
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, p.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, password, chromedp.ByID),
		chromedp.Click(`button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#nav-home.on`, chromedp.ByQuery),
		chromedp.Text(`h1`, &heading, chromedp.ByQuery),
	)
	if heading != "Acme Logistics" {
		b.t.Fatalf("after sign-in as %s the home says %q", b.who, heading)
	}
}

// visit opens path, checks the page shows want, saves a screenshot as name and returns the
// page's HTML.
func (b *browser) visit(name, path, want string) string {
	b.t.Helper()
	var html string
	var shot []byte
	b.run("visit "+name,
		chromedp.Navigate(b.s.srv.URL+path),
		chromedp.WaitVisible(`#main`, chromedp.ByID),
		chromedp.OuterHTML(`html`, &html, chromedp.ByQuery),
	)
	if !strings.Contains(html, want) {
		b.t.Fatalf("%s as %s: the page lacks %q", name, b.who, want)
	}
	b.shoot(name, &shot)
	return html
}

// fits fails the test when anything on the page reaches past the screen's right edge, or the
// page scrolls sideways. Elements inside a box that scrolls on its own (the graph) do not
// count.
func (b *browser) fits(name string) {
	b.t.Helper()
	var scrollW, clientW int
	var over []string
	b.run("measure "+name, chromedp.Evaluate(`document.documentElement.scrollWidth`, &scrollW),
		chromedp.Evaluate(`document.documentElement.clientWidth`, &clientW),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#main *')).filter(function (e) {
			for (var p = e.parentElement; p; p = p.parentElement) { var o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return false; }
			return e.getBoundingClientRect().right > document.documentElement.clientWidth + 1;
		}).map(function (e) { return e.tagName + (e.id ? '#' + e.id : '') + ' ' + (e.textContent || '').slice(0, 40); })`, &over))
	if scrollW > clientW+1 || len(over) > 0 {
		b.t.Fatalf("%s at %d px: the page is %d px wide; off-screen: %v", name, clientW, scrollW, over)
	}
}

func (b *browser) shoot(name string, shot *[]byte) {
	b.t.Helper()
	b.run("screenshot "+name, chromedp.FullScreenshot(shot, 100)) // quality 100: PNG
	path := filepath.Join(b.dir, "console-"+b.who+"-"+name+".png")
	if err := os.WriteFile(path, *shot, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// TestConsoleInBrowser signs in as an owner and as a member with a real Chromium, visits
// every console page with the data of real runs, and saves a screenshot of each to
// artifacts/console-<who>-<page>.png. The owner creates a key, cancels a run and replays a
// callback; the member sees the same data without the forms that change it.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser; skipped with -short")
	}
	browsertest.Chromium(t)
	start := time.Now()
	s := newStack(t)
	s.seed(t)
	t.Logf("seeded in %s", time.Since(start).Round(time.Millisecond))

	owner := s.browser(t, "owner", 1280, 900)
	owner.signIn(s.owner)
	for _, p := range s.pages() {
		owner.visit(p.name, p.path, p.want)
	}
	ws := "/workspaces/" + s.ws
	owner.visit("mcp-tokens", ws+"/mcp-tokens", "Create a token")

	// Create a key: its secret is on the page once; reloading creates no second key and
	// shows the secret no more; revoking asks first, warns that it is the last key, and the
	// list says revoked at once.
	var shot []byte
	var secret string
	owner.run("create a key",
		chromedp.Navigate(s.srv.URL+ws+"/api-keys"),
		chromedp.WaitVisible(`#label`, chromedp.ByID),
		chromedp.SendKeys(`#label`, "CI deploys", chromedp.ByID),
		chromedp.Click(`input[name=workflows][value="`+s.workflowID+`"]`, chromedp.ByQuery),
		chromedp.Click(`button[value=create]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#minted-secret`, chromedp.ByID),
		chromedp.Text(`#minted-secret`, &secret, chromedp.ByID),
	)
	if len(strings.TrimSpace(secret)) < 20 {
		t.Fatalf("the new key's secret: %q", secret)
	}
	owner.shoot("api-key-created", &shot)
	var html string
	var keys int
	owner.run("reload after the create",
		chromedp.Reload(),
		chromedp.WaitVisible(`#notice`, chromedp.ByID),
		chromedp.OuterHTML(`html`, &html, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#keys tbody tr').length`, &keys),
	)
	if strings.Contains(html, strings.TrimSpace(secret)) || strings.Contains(html, `id="minted-secret"`) || !strings.Contains(html, "shown once and is not shown again") {
		t.Fatal("the reloaded page shows the secret again")
	}
	if keys != 1 {
		t.Fatalf("after a reload the workspace has %d keys, want 1", keys)
	}
	owner.shoot("api-key-reloaded", &shot)
	var state string
	owner.run("revoke the key",
		chromedp.Click(`#keys a.danger`, chromedp.ByQuery),
		chromedp.WaitVisible(`#confirm-revoke`, chromedp.ByID),
		chromedp.WaitVisible(`#last-key-warning`, chromedp.ByID),
	)
	owner.shoot("api-key-revoke-confirm", &shot)
	owner.run("confirm the revoke",
		chromedp.Click(`#confirm-revoke-button`, chromedp.ByID),
		chromedp.WaitNotPresent(`#confirm-revoke`, chromedp.ByID),
		chromedp.WaitVisible(`#notice`, chromedp.ByID),
		chromedp.Text(`#keys .key-state`, &state, chromedp.ByQuery),
	)
	if !strings.HasPrefix(strings.TrimSpace(state), "revoked") {
		t.Fatalf("right after the revoke the key says %q", state)
	}
	owner.shoot("api-key-revoked", &shot)

	// An MCP token the same way: shown once, a reload mints no second, revoking asks first.
	var token string
	owner.run("create an MCP token",
		chromedp.Navigate(s.srv.URL+ws+"/mcp-tokens"),
		chromedp.WaitVisible(`#label`, chromedp.ByID),
		chromedp.SendKeys(`#label`, "assistant", chromedp.ByID),
		chromedp.Click(`button[value=mint]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#minted-token`, chromedp.ByID),
		chromedp.Text(`#minted-token`, &token, chromedp.ByID),
	)
	var tokens int
	owner.run("reload after the mint",
		chromedp.Reload(),
		chromedp.WaitVisible(`#notice`, chromedp.ByID),
		chromedp.OuterHTML(`html`, &html, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#tokens tbody tr').length`, &tokens),
	)
	if len(strings.TrimSpace(token)) < 20 || strings.Contains(html, strings.TrimSpace(token)) || strings.Contains(html, `id="minted-token"`) || tokens != 1 {
		t.Fatalf("the MCP token %q: the reloaded page shows it again or lists %d tokens, want 1", token, tokens)
	}
	owner.run("revoke the MCP token",
		chromedp.Click(`#tokens a.danger`, chromedp.ByQuery),
		chromedp.WaitVisible(`#confirm-revoke`, chromedp.ByID),
		chromedp.Click(`#confirm-revoke-button`, chromedp.ByID),
		chromedp.WaitNotPresent(`#confirm-revoke`, chromedp.ByID),
		chromedp.WaitVisible(`#notice`, chromedp.ByID),
		chromedp.Text(`#tokens .token-state`, &state, chromedp.ByQuery),
	)
	if !strings.HasPrefix(strings.TrimSpace(state), "revoked") {
		t.Fatalf("right after the revoke the MCP token says %q", state)
	}

	// The run page's stages open their own pages: input, output, error, attempts.
	owner.run("open a stage of the run",
		chromedp.Navigate(s.srv.URL+"/dashboard/runs/"+s.runID),
		chromedp.WaitVisible(`#graph svg`, chromedp.ByQuery),
		clickStageLink,
		chromedp.WaitVisible(`#stage-detail`, chromedp.ByID),
		chromedp.WaitVisible(`#stage-input`, chromedp.ByID),
		chromedp.WaitVisible(`#stage-attempts`, chromedp.ByID),
		chromedp.WaitVisible(`#stage-execution`, chromedp.ByID),
	)
	owner.shoot("run-stage", &shot)

	// A run watched live loses its cancel form when it ends.
	watched := s.trigger(t, s.slowWorkflowID, `{}`)
	owner.run("watch a run",
		chromedp.Navigate(s.srv.URL+"/dashboard/runs/"+watched),
		chromedp.WaitVisible(`#cancel-run`, chromedp.ByID),
		chromedp.WaitVisible(`#live`, chromedp.ByID),
	)
	if _, err := s.env.Cmds.Workflows.CancelRun(context.Background(), watched, "ended elsewhere"); err != nil {
		t.Fatal(err)
	}
	owner.run("see it end",
		chromedp.WaitVisible(`#run-status[data-status="CANCELED"]`, chromedp.ByQuery),
		chromedp.WaitNotPresent(`#cancel-form`, chromedp.ByID),
	)
	owner.shoot("run-ended-live", &shot)

	// Cancel a slow run (30 s of delays, started now) from its page; replay the callback from
	// the execution's page.
	slow := s.trigger(t, s.slowWorkflowID, `{}`)
	owner.run("cancel the slow run",
		chromedp.Navigate(s.srv.URL+"/dashboard/runs/"+slow),
		chromedp.WaitVisible(`#cancel-run`, chromedp.ByID),
		chromedp.Click(`#cancel-run`, chromedp.ByID),
		chromedp.WaitVisible(`#notice`, chromedp.ByID),
		chromedp.WaitVisible(`#cancel-box`, chromedp.ByID),
	)
	owner.shoot("run-cancelled", &shot)
	owner.run("replay the callback",
		chromedp.Navigate(s.srv.URL+ws+"/executions/"+s.executionID),
		chromedp.WaitVisible(`#replay`, chromedp.ByID),
		chromedp.Click(`#replay`, chromedp.ByID),
		chromedp.WaitVisible(`#notice`, chromedp.ByID),
	)
	owner.shoot("callback-replayed", &shot)

	// The pages of issues 28 and 29: a workspace's modules, one module's form, its workers, and
	// a bulk action started from the workflow page's form (created before 2001, it matches no
	// run, so the runs the later steps look at stay as they are).
	long := strings.Repeat("a-very-long-description-without-spaces-", 25)
	if _, err := s.env.Cmds.Modules.Register(context.Background(), commands.RegisterModule{WorkspaceID: s.ws,
		Name: "acme.resize-images-for-the-catalogue", Description: long, OutputSchema: json.RawMessage(`{"type":"object"}`),
		Transport: commands.ModuleTransport{Type: execution.TransportWorker}, By: access.Rights{Role: "owner"}}); err != nil {
		t.Fatal(err)
	}
	// The modules page reads the read model: wait for its projector to have the module.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, n, err := s.env.Queries.ModulesOf(context.Background(), s.ws, projections.Page{Page: 1, Limit: 10}); err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the modules read model never listed the module registered")
		}
	}
	s.workers.Store(&[]console.Worker{{ID: "host-1.example.internal/4242", Modules: []string{"acme.resize-images-for-the-catalogue", "acme.crop"}, InFlight: 3, LastPoll: time.Now()}})
	extra := []struct{ name, path, want string }{
		{"modules", ws + "/modules", "acme.resize-images-for-the-catalogue"},
		{"module", ws + "/modules/acme.resize-images-for-the-catalogue", "acme.resize-images-for-the-catalogue"},
		{"workers", ws + "/workers", "host-1.example.internal/4242"},
	}
	for _, p := range extra {
		owner.visit(p.name, p.path, p.want)
		owner.fits(p.name)
	}
	// The surfaces of issue 31 on the workflow and run pages: schedules, event triggers with
	// debounce, an inbound webhook, and a run waiting for an approval.
	intake := s.workflow(t, `{"name": "Nightly intake", "components": [
		{"id": "api", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "nightly", "module": "ON_SCHEDULE", "config": {"cron": "0 2 * * *", "timezone": "Europe/Berlin"}, "position": [0, 120]},
		{"id": "paid", "module": "ON_EVENT", "config": {"name": "order.paid", "filter": "amount > 0", "debounce": {"key": "customer", "quietMs": 60000}}, "position": [0, 240]},
		{"id": "push", "module": "ON_WEBHOOK", "config": {"scheme": "github"}, "position": [0, 360]},
		{"id": "signoff", "module": "WAIT", "config": {"approval": {"question": "Ship tonight's intake to the warehouse?", "timeout": "24h", "onTimeout": "fail"}}, "position": [260, 0]},
		{"id": "ship", "module": "core.echo", "position": [520, 0]}],
	  "edges": [{"from": "api", "to": "signoff"}, {"from": "nightly", "to": "signoff"}, {"from": "paid", "to": "signoff"},
		{"from": "push", "to": "signoff"}, {"from": "signoff", "to": "ship"}]}`)
	waiting := s.trigger(t, intake.ID, `{"batch": 7}`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := s.env.Cmds.Workflows.Run(context.Background(), waiting); err == nil && !st.Waiting() &&
			slices.ContainsFunc(st.Stages, func(g run.Stage) bool { return g.Waiting != nil }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the intake run never waited for its approval")
		}
	}
	extra = append(extra,
		struct{ name, path, want string }{"workflow-triggers", ws + "/workflows/" + intake.ID, "Event triggers"},
		struct{ name, path, want string }{"run-waiting", "/dashboard/runs/" + waiting, "Ship tonight"})
	for _, p := range extra[len(extra)-2:] {
		owner.visit(p.name, p.path, p.want)
		owner.fits(p.name)
	}

	var bulkURL string
	owner.run("start a bulk action",
		chromedp.Navigate(s.srv.URL+ws+"/workflows/"+s.workflowID),
		chromedp.WaitVisible(`#bulk-form`, chromedp.ByID),
		chromedp.SetValue(`#bulk-before`, "2001-01-01T00:00", chromedp.ByID),
		chromedp.Click(`#bulk-run`, chromedp.ByID),
		chromedp.WaitVisible(`#bulk-detail`, chromedp.ByID),
		chromedp.Location(&bulkURL),
	)
	owner.shoot("bulk", &shot)
	owner.fits("bulk")
	extra = append(extra, struct{ name, path, want string }{"bulk", strings.TrimPrefix(bulkURL, s.srv.URL), "Runs matched"})

	// At phone width the navigation and tables still fit. One browser serves every step: a
	// browser's start is the slowest thing here on a busy machine.
	phone := owner
	phone.who = "owner-phone"
	phone.run("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	phone.visit("home", ws, "Recent runs")
	phone.visit("runs", ws+"/runs", s.runID)
	for _, p := range []struct{ name, path, want string }{
		{"execution", ws + "/executions/" + s.executionID, "A-1042"},
		{"executions", ws + "/executions", s.executionID},
		{"workflow", ws + "/workflows/" + s.workflowID, "Start a run"},
		{"api-keys", ws + "/api-keys", "CI deploys"},
		{"billing", ws + "/billing", "Plan-included"},
		{"members", ws + "/members", s.member.Email},
	} {
		phone.visit(p.name, p.path, p.want)
		phone.fits(p.name)
	}
	for _, p := range extra {
		phone.visit(p.name, p.path, p.want)
		phone.fits(p.name)
	}
	phone.visit("run", "/dashboard/runs/"+s.runID, "Each order")
	phone.run("wait for the graph", chromedp.WaitVisible(`#graph svg`, chromedp.ByQuery))
	phone.shoot("run", &shot)
	phone.fits("run")
	var collapsed bool
	phone.run("the stage table collapses", chromedp.Evaluate(`getComputedStyle(document.querySelector('#stages thead')).display === 'none' &&
		Array.from(document.querySelectorAll('#stages td')).every(function (td) { return td.textContent === '' || getComputedStyle(td).display === 'block'; })`, &collapsed))
	if !collapsed {
		t.Fatal("at phone width the stage table does not collapse into rows")
	}
	var breaks []string
	phone.run("no word breaks mid-token", chromedp.Evaluate(`Array.from(document.querySelectorAll('#main code, #main .runid, #main td, #main .notice')).
		filter(function (e) { return getComputedStyle(e).wordBreak === 'break-all'; }).map(function (e) { return e.outerHTML.slice(0, 80); })`, &breaks))
	if len(breaks) > 0 {
		t.Fatalf("at phone width these break words anywhere: %v", breaks)
	}
	phone.run("open a stage at phone width",
		clickStageLink,
		chromedp.WaitVisible(`#stage-detail`, chromedp.ByID),
	)
	phone.shoot("run-stage", &shot)
	phone.fits("run-stage")
	var navScrolls bool
	phone.run("the navigation shows it scrolls", chromedp.Evaluate(`(function () { var n = document.querySelector('nav.sections');
		return n.scrollWidth > n.clientWidth && getComputedStyle(n).backgroundImage.indexOf('gradient') >= 0; })()`, &navScrolls))
	if !navScrolls {
		t.Fatal("at phone width the navigation gives no sign that it scrolls")
	}

	member := owner
	member.who = "member"
	member.run("sign out",
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(s.srv.URL+"/logout"),
		chromedp.WaitVisible(`button[type=submit]`, chromedp.ByQuery),
		chromedp.Click(`button[type=submit]`, chromedp.ByQuery),
		// The sign-out POST redirects to /login. Wait for its form: waiting on anything the
		// logout page also has lets the next navigation race the redirect (net::ERR_ABORTED).
		chromedp.WaitVisible(`#email`, chromedp.ByID),
	)
	member.signIn(s.member)
	for _, p := range s.pages() {
		html := member.visit(p.name, p.path, p.want)
		for _, form := range []string{`id="nav-mcp"`, `id="create-key"`, `id="cancel-form"`, `id="replay"`} {
			if strings.Contains(html, form) {
				t.Fatalf("%s shows a member %s", p.name, form)
			}
		}
	}
	member.visit("mcp-tokens-refused", ws+"/mcp-tokens", "Your role in this workspace (member) does not allow this")
	member.visit("run-cancelled", "/dashboard/runs/"+slow, "CANCELED")
}

// clickStageLink follows the fourth stage's link of the run page's table. The page draws the
// table again when its live stream reports (once more for an ended run, if the report comes
// before the first fetch is drawn), so a node found for a mouse click can be replaced before
// the click; a chromedp.Click on it then waited for a node that never shows again (a CI run's
// ten-minute hang). The page itself waits for the link, frame by frame, and clicks the one
// there is at that moment.
var clickStageLink = chromedp.Evaluate(`new Promise(function (resolve) {
	(function tryClick() {
		var a = document.querySelector('#stages tr:nth-child(4) a.stage-link');
		if (a) { a.click(); resolve(true); } else { requestAnimationFrame(tryClick); }
	})();
})`, nil, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })
