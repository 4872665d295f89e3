package identity_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/server"
	"github.com/switchyard/switchyard/testenv"
)

// clock is a settable clock: tests move it forward instead of sleeping.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// rig is the whole service's identity side over a real database and a real HTTP server.
type rig struct {
	t       testing.TB
	env     *testenv.Env
	cmds    *commands.Commands
	clock   *clock
	idp     *identity.Provider
	srv     *httptest.Server
	issuer  string
	queries *projections.Queries
	sealKey []byte
}

func newRig(t *testing.T) *rig { return newRigTB(t) }

func newRigTB(t testing.TB) *rig {
	t.Helper()
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	return startRig(t, testenv.New(t), &clock{}, key, "")
}

// newRigOn starts a second process of the same service: same database and secret key, its own
// command handler, key ring and HTTP server.
func newRigOn(t testing.TB, first *rig) *rig {
	return startRig(t, first.env, first.clock, first.sealKey, first.issuer)
}

func startRig(t testing.TB, env *testenv.Env, clk *clock, key []byte, issuer string) *rig {
	t.Helper()
	cmds := commands.New(env.Store, commands.WithClock(clk.Now))
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	if issuer == "" {
		issuer = srv.URL
	}
	idp, err := identity.New(identity.Config{Issuer: issuer, Cmds: cmds, Queries: env.Queries, Sealer: sealer, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := idp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, err := server.Routes(server.RoutesConfig{Cmds: cmds, Queries: env.Queries, Identity: idp})
	if err != nil {
		t.Fatal(err)
	}
	handler = s.Handler()
	return &rig{t: t, env: env, cmds: cmds, clock: clk, idp: idp, srv: srv, issuer: issuer, queries: env.Queries, sealKey: key}
}

const testPassword = "correct-horse-battery"

type account struct {
	ID, Email string
}

func (r *rig) user(staff bool) account {
	r.t.Helper()
	email := fmt.Sprintf("u-%s@example.com", uuid.NewString()[:8])
	id, err := r.cmds.Identity.RegisterUser(context.Background(), commands.RegisterUser{Email: email, Password: testPassword, Name: "Test User", Staff: staff})
	if err != nil {
		r.t.Fatal(err)
	}
	return account{ID: id, Email: email}
}

// workspace creates a workspace owned by owner, with credits, and waits for its membership to
// reach the read model the picker lists.
func (r *rig) workspace(owner account, credits int64) string {
	r.t.Helper()
	ctx := context.Background()
	ws, err := r.cmds.Workspaces.CreateWorkspace(ctx, "ws-"+uuid.NewString()[:6], owner.Email)
	if err != nil {
		r.t.Fatal(err)
	}
	if credits > 0 {
		if _, err := r.cmds.Billing.TopUp(ctx, ws, billing.FromWhole(credits), ""); err != nil {
			r.t.Fatal(err)
		}
	}
	r.env.CaughtUp(r.t, "workspaces")
	return ws
}

type registered struct {
	ClientID, Secret, RedirectURI string
}

// app registers, submits and approves an app owned by owner.
func (r *rig) app(owner account, scopes ...string) registered {
	return r.registerApp(owner, false, scopes)
}

// publicApp registers and approves a public app (no secret; PKCE only).
func (r *rig) publicApp(owner account, scopes ...string) registered {
	return r.registerApp(owner, true, scopes)
}

func (r *rig) registerApp(owner account, public bool, scopes []string) registered {
	r.t.Helper()
	ctx := context.Background()
	redirect := "http://127.0.0.1:9/callback"
	id, err := r.cmds.Apps.RegisterApp(ctx, commands.RegisterApp{OwnerUserID: owner.ID, Public: public, Metadata: app.Metadata{Name: "Acme Reports",
		Description: "Reports for your workflows", LogoURL: "https://example.com/logo.png", RedirectURIs: []string{redirect}, Scopes: scopes}})
	if err != nil {
		r.t.Fatal(err)
	}
	secret := ""
	if !public {
		if secret, err = r.cmds.Apps.IssueAppSecret(ctx, id); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.cmds.Apps.SubmitApp(ctx, id); err != nil {
		r.t.Fatal(err)
	}
	if err := r.cmds.Apps.ApproveApp(ctx, id, "staff", 1); err != nil {
		r.t.Fatal(err)
	}
	return registered{ClientID: id, Secret: secret, RedirectURI: redirect}
}

// browser is an HTTP client with a cookie jar that does not follow redirects, so each step of
// the flow is visible.
type browser struct {
	t    testing.TB
	c    *http.Client
	base string
}

func (r *rig) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: r.t, base: r.srv.URL, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status   int
	location string
	body     string
}

func (b *browser) do(method, target string, form url.Values) page {
	b.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = b.base + target
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(data)}
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// hidden collects a page's hidden form fields.
func hidden(body string) url.Values {
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(body, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	return v
}

// authorize drives the browser side from the app's authorize URL to the redirect back to the
// app: sign-in (when needed), the workspace picker, consent. It returns the redirect's query.
func (b *browser) authorize(authURL string, who account, workspaceID string, approve bool) url.Values {
	b.t.Helper()
	return b.decide(b.consent(authURL, who, workspaceID), approve)
}

// consent drives the browser from the app's authorize URL to the consent page: sign-in (when
// needed) and the workspace picker.
func (b *browser) consent(authURL string, who account, workspaceID string) page {
	b.t.Helper()
	p := b.do("GET", authURL, nil)
	if p.status == http.StatusFound && strings.HasPrefix(p.location, "/login") {
		login := b.do("GET", p.location, nil)
		if login.status != 200 || !strings.Contains(login.body, `autocomplete="current-password"`) {
			b.t.Fatalf("login page: %d %s", login.status, login.body)
		}
		f := hidden(login.body)
		f.Set("email", who.Email)
		f.Set("password", testPassword)
		done := b.do("POST", "/login", f)
		if done.status != http.StatusSeeOther {
			b.t.Fatalf("sign in: %d %s", done.status, done.body)
		}
		p = b.do("GET", done.location, nil)
	}
	if p.status != 200 || !strings.Contains(p.body, "Choose a workspace") {
		b.t.Fatalf("picker: %d %s %s", p.status, p.location, p.body)
	}
	if !strings.Contains(p.body, workspaceID) {
		b.t.Fatalf("picker does not offer workspace %s:\n%s", workspaceID, p.body)
	}
	q := hidden(p.body)
	q.Set("workspace_id", workspaceID)
	consent := b.do("GET", "/oauth/authorize?"+q.Encode(), nil)
	if consent.status != 200 || !strings.Contains(consent.body, "Allow") {
		b.t.Fatalf("consent: %d %s", consent.status, consent.body)
	}
	return consent
}

// decide posts the consent page's form with the decision and returns the redirect's query.
func (b *browser) decide(consent page, approve bool) url.Values {
	b.t.Helper()
	f := hidden(consent.body)
	if approve {
		f.Set("decision", "approve")
	} else {
		f.Set("decision", "deny")
	}
	back := b.do("POST", "/oauth/authorize", f)
	if back.status != http.StatusSeeOther {
		b.t.Fatalf("decision: %d %s", back.status, back.body)
	}
	u, err := url.Parse(back.location)
	if err != nil {
		b.t.Fatal(err)
	}
	return u.Query()
}

// api calls a JSON endpoint with a bearer token.
func (r *rig) api(method, path, token string, body any) (int, map[string]any) {
	r.t.Helper()
	raw := ""
	if body != nil {
		b, _ := json.Marshal(body)
		raw = string(b)
	}
	return r.rawAPI(method, path, token, raw)
}

// rawAPI sends body byte for byte (api re-encodes it, which would replace what a test sends).
func (r *rig) rawAPI(method, path, token, body string) (int, map[string]any) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, r.srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// form posts a form to an OAuth endpoint with client credentials in Basic auth.
func (r *rig) form(path string, client registered, v url.Values) (int, map[string]any) {
	r.t.Helper()
	req, _ := http.NewRequest("POST", r.srv.URL+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if client.ClientID != "" {
		req.SetBasicAuth(url.QueryEscape(client.ClientID), url.QueryEscape(client.Secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

var pageOne = projections.Page{Page: 1, Limit: 20}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
