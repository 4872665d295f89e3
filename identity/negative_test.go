package identity_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/app"
)

func (r *rig) authURL(c registered, scope, challenge, method string) string {
	q := url.Values{"client_id": {c.ClientID}, "redirect_uri": {c.RedirectURI}, "response_type": {"code"},
		"scope": {scope}, "state": {"st"}, "code_challenge": {challenge}, "code_challenge_method": {method}}
	return "/oauth/authorize?" + q.Encode()
}

// grant runs the browser flow and returns a fresh code and its verifier.
func (r *rig) grant(b *browser, c registered, who account, ws, scope string) (code, verifier string) {
	verifier = oauth2.GenerateVerifier()
	back := b.authorize(r.authURL(c, scope, oauth2.S256ChallengeFromVerifier(verifier), "S256"), who, ws, true)
	if back.Get("code") == "" {
		r.t.Fatalf("no code: %v", back)
	}
	return back.Get("code"), verifier
}

func (r *rig) exchange(c registered, code, verifier string) (int, map[string]any) {
	return r.form("/oauth/token", c, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {c.RedirectURI}})
}

func (r *rig) refresh(c registered, token string) (int, map[string]any) {
	return r.form("/oauth/token", c, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}})
}

func (r *rig) tokens(b *browser, c registered, who account, ws, scope string) map[string]any {
	r.t.Helper()
	code, v := r.grant(b, c, who, ws, scope)
	st, tok := r.exchange(c, code, v)
	if st != 200 {
		r.t.Fatalf("exchange: %d %v", st, tok)
	}
	return tok
}

func TestAuthorizeErrors(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	c := r.app(owner, "openid", "workspace:read")
	b := r.browser()
	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())

	// Unregistered redirect URI: an error page, and no redirect at all.
	q := url.Values{"client_id": {c.ClientID}, "redirect_uri": {"https://evil.example/cb"}, "response_type": {"code"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	p := b.do("GET", "/oauth/authorize?"+q.Encode(), nil)
	if p.status != 400 || p.location != "" || !strings.Contains(p.body, "Invalid redirect URI") {
		t.Fatalf("unregistered redirect: %d %q", p.status, p.location)
	}
	// Unknown client: the same.
	q.Set("client_id", "00000000-0000-0000-0000-000000000000")
	q.Set("redirect_uri", c.RedirectURI)
	if p := b.do("GET", "/oauth/authorize?"+q.Encode(), nil); p.status != 400 || p.location != "" {
		t.Fatalf("unknown client: %d %q", p.status, p.location)
	}
	redirected := func(p page, code string) {
		t.Helper()
		u, err := url.Parse(p.location)
		if err != nil || p.status != http.StatusFound || !strings.HasPrefix(p.location, c.RedirectURI) ||
			u.Query().Get("error") != code || u.Query().Get("state") != "st" || u.Query().Get("iss") != r.issuer {
			t.Fatalf("want redirect with error %s, got %d %q", code, p.status, p.location)
		}
	}
	// PKCE plain is rejected (by redirect: client and redirect URI are valid).
	redirected(b.do("GET", r.authURL(c, "openid", challenge, "plain"), nil), "invalid_request")
	// No PKCE at all.
	redirected(b.do("GET", r.authURL(c, "openid", "", ""), nil), "invalid_request")
	// A scope the app did not register.
	redirected(b.do("GET", r.authURL(c, "openid workspace:admin", challenge, "S256"), nil), "invalid_scope")
	// Another response type.
	u := strings.Replace(r.authURL(c, "openid", challenge, "S256"), "response_type=code", "response_type=token", 1)
	redirected(b.do("GET", u, nil), "unsupported_response_type")
	// prompt=none without a session.
	redirected(b.do("GET", r.authURL(c, "openid", challenge, "S256")+"&prompt=none", nil), "login_required")
	// The user declines.
	back := b.authorize(r.authURL(c, "openid", challenge, "S256"), owner, ws, false)
	if back.Get("error") != "access_denied" || back.Get("state") != "st" {
		t.Fatalf("deny: %v", back)
	}
	// A consent form without the CSRF token is refused.
	f := url.Values{"client_id": {c.ClientID}, "redirect_uri": {c.RedirectURI}, "response_type": {"code"}, "code_challenge": {challenge},
		"code_challenge_method": {"S256"}, "workspace_id": {ws}, "decision": {"approve"}}
	if p := b.do("POST", "/oauth/authorize", f); p.status != http.StatusForbidden {
		t.Fatalf("consent without CSRF: %d %q", p.status, p.location)
	}
}

func TestTokenErrors(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	c := r.app(owner, "openid", "workspace:read")
	b := r.browser()

	// Wrong verifier: invalid_grant, and the code still works with the right one.
	code, verifier := r.grant(b, c, owner, ws, "openid workspace:read")
	if st, body := r.exchange(c, code, oauth2.GenerateVerifier()); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("wrong verifier: %d %v", st, body)
	}
	// Wrong client secret.
	bad := c
	bad.Secret = "sys_wrong"
	if st, body := r.exchange(bad, code, verifier); st != 401 || body["error"] != "invalid_client" {
		t.Fatalf("wrong secret: %d %v", st, body)
	}
	st, tok := r.exchange(c, code, verifier)
	if st != 200 || tok["token_type"] != "Bearer" {
		t.Fatalf("exchange: %d %v", st, tok)
	}
	access := tok["access_token"].(string)
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", access, nil); st != 200 {
		t.Fatalf("workflows: %d", st)
	}
	// Code reuse: refused, and everything issued from the code is revoked.
	if st, body := r.exchange(c, code, verifier); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("code reuse: %d %v", st, body)
	}
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", access, nil); st != 401 {
		t.Fatalf("token of a reused code: %d", st)
	}
	if st, _ := r.refresh(c, tok["refresh_token"].(string)); st != 400 {
		t.Fatalf("refresh of a reused code: %d", st)
	}

	// A code expires after 60 seconds.
	code, verifier = r.grant(b, c, owner, ws, "openid")
	r.clock.Advance(61 * time.Second)
	if st, body := r.exchange(c, code, verifier); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("expired code: %d %v", st, body)
	}

	// An expired access token is 401; its refresh token still gets a new one.
	tok = r.tokens(b, c, owner, ws, "openid workspace:read")
	r.clock.Advance(16 * time.Minute)
	if st, body := r.api("GET", "/v1/workspaces/"+ws+"/workflows", tok["access_token"].(string), nil); st != 401 || body["message"] == nil {
		t.Fatalf("expired token: %d %v", st, body)
	}
	st, tok2 := r.refresh(c, tok["refresh_token"].(string))
	if st != 200 {
		t.Fatalf("refresh after expiry: %d %v", st, tok2)
	}

	// Unsupported grant, missing parameters.
	if st, body := r.form("/oauth/token", c, url.Values{"grant_type": {"password"}}); st != 400 || body["error"] != "unsupported_grant_type" {
		t.Fatalf("password grant: %d %v", st, body)
	}
	if st, body := r.form("/oauth/token", c, url.Values{"grant_type": {"authorization_code"}}); st != 400 || body["error"] != "invalid_request" {
		t.Fatalf("missing code: %d %v", st, body)
	}
}

func TestWorkspaceEndpointChecks(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 3)
	other := r.workspace(owner, 3)
	c := r.app(owner, "openid", "workspace:read", "workspace:admin")
	b := r.browser()
	readOnly := r.tokens(b, c, owner, ws, "openid workspace:read")["access_token"].(string)

	// Another workspace: 403 even though the user is a member there (SPEC.md 5 rule 6).
	if st, body := r.api("GET", "/v1/workspaces/"+other+"/workflows", readOnly, nil); st != 403 || body["statusCode"] != 403.0 {
		t.Fatalf("other workspace: %d %v", st, body)
	}
	// Missing scope: workspace:read does not include billing (carved out), nor API keys.
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/billing", readOnly, nil); st != 403 {
		t.Fatalf("billing with workspace:read: %d", st)
	}
	if st, _ := r.api("POST", "/v1/workspaces/"+ws+"/api-keys", readOnly, map[string]any{"label": "x"}); st != 403 {
		t.Fatalf("api key with workspace:read: %d", st)
	}
	// Missing, malformed and foreign tokens: 401.
	for _, tok := range []string{"", "garbage", strings.Replace(readOnly, ".", "x.", 1)} {
		if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", tok, nil); st != 401 {
			t.Fatalf("token %q: %d", tok, st)
		}
	}
	// Pagination is validated.
	if st, body := r.api("GET", "/v1/workspaces/"+ws+"/workflows?limit=101", readOnly, nil); st != 400 || !strings.Contains(body["message"].(string), "limit") {
		t.Fatalf("limit 101: %d %v", st, body)
	}
	// workspace:admin satisfies the narrower scopes (in another workspace: its own authorization).
	admin := r.tokens(b, c, owner, other, "workspace:admin")["access_token"].(string)
	if st, _ := r.api("GET", "/v1/workspaces/"+other+"/billing", admin, nil); st != 200 {
		t.Fatalf("billing with admin: %d", st)
	}
	if st, key := r.api("POST", "/v1/workspaces/"+other+"/api-keys", admin, map[string]any{"label": "k", "expiresAt": time.Now().Add(time.Hour)}); st != 201 || key["expiresAt"] == nil {
		t.Fatalf("api key with admin: %d %v", st, key)
	}
	if st, body := r.api("POST", "/v1/workspaces/"+other+"/api-keys", admin, map[string]any{"label": "k", "expiresAt": "2001-01-01T00:00:00Z"}); st != 400 {
		t.Fatalf("past expiry: %d %v", st, body)
	}
	// The read-only token still works: the authorizations are independent (SPEC.md 2.12).
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", readOnly, nil); st != 200 {
		t.Fatalf("independent authorization: %d", st)
	}

	// A session JWT of a member acts with the member's role.
	st, login := r.api("POST", "/v1/auth/login", "", map[string]any{"email": owner.Email, "password": testPassword})
	if st != 200 || login["token"] == nil {
		t.Fatalf("login: %d %v", st, login)
	}
	session := login["token"].(string)
	if st, _ := r.api("GET", "/v1/workspaces/"+other+"/billing", session, nil); st != 200 {
		t.Fatalf("session of owner: %d", st)
	}
	stranger := r.user(false)
	_, login = r.api("POST", "/v1/auth/login", "", map[string]any{"email": stranger.Email, "password": testPassword})
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/billing", login["token"].(string), nil); st != 403 {
		t.Fatalf("session of a non-member: %d", st)
	}
	if err := r.cmds.Workspaces.AddMember(context.Background(), ws, stranger.Email, "member"); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/billing", login["token"].(string), nil); st != 200 {
		t.Fatalf("session of a member, billing: %d", st)
	}
	if st, _ := r.api("POST", "/v1/workspaces/"+ws+"/api-keys", login["token"].(string), map[string]any{}); st != 403 {
		t.Fatalf("session of a member, api key: %d", st)
	}
}

func TestRevocationAndRevert(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	c := r.app(owner, "openid", "workspace:read")
	b := r.browser()
	tok := r.tokens(b, c, owner, ws, "openid workspace:read")
	access := tok["access_token"].(string)

	// Revoking the authorization (the connected-apps page does this) is effective at once.
	st, intro := r.form("/oauth/introspect", c, url.Values{"token": {access}})
	if st != 200 || intro["active"] != true || intro["workspace_id"] != ws {
		t.Fatalf("introspect: %d %v", st, intro)
	}
	r.env.CaughtUp(t, "authorizations")
	list, _, err := r.queries.AuthorizationsOfWorkspace(ctx, ws, pageOne)
	if err != nil || len(list) != 1 || list[0].ClientID != c.ClientID || list[0].UserEmail != owner.Email {
		t.Fatalf("connected apps: %+v %v", list, err)
	}
	if err := r.cmds.Apps.RevokeAuthorization(ctx, list[0].ID, "revoked by user"); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", access, nil); st != 401 {
		t.Fatalf("revoked authorization: %d", st)
	}
	if _, intro := r.form("/oauth/introspect", c, url.Values{"token": {access}}); intro["active"] != false {
		t.Fatalf("introspect after revoke: %v", intro)
	}

	// Revert: the flow is disabled, the secret refused, live tokens stop working.
	tok = r.tokens(b, c, owner, ws, "openid workspace:read")
	if err := r.cmds.Apps.RevertApp(ctx, c.ClientID, "staff", "logo is misleading"); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", tok["access_token"].(string), nil); st != 401 {
		t.Fatalf("token of a reverted app: %d", st)
	}
	if st, body := r.refresh(c, tok["refresh_token"].(string)); st != 401 || body["error"] != "invalid_client" {
		t.Fatalf("secret of a reverted app: %d %v", st, body)
	}
	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
	if p := b.do("GET", r.authURL(c, "openid", challenge, "S256"), nil); p.status != 400 || p.location != "" {
		t.Fatalf("authorize with a reverted app: %d %q", p.status, p.location)
	}
	// Back to draft, it can be edited again; approved again, the old secret stays invalid.
	if err := r.cmds.Apps.UpdateApp(ctx, c.ClientID, app.Metadata{Name: "Acme Reports 2", RedirectURIs: []string{c.RedirectURI}, Scopes: []string{"openid"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.cmds.Apps.SubmitApp(ctx, c.ClientID); err != nil {
		t.Fatal(err)
	}
	if err := r.cmds.Apps.ApproveApp(ctx, c.ClientID, "staff", 2); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.refresh(c, tok["refresh_token"].(string)); st != 401 {
		t.Fatalf("old secret after re-approval: %d", st)
	}
	// An approved app's metadata is locked: 409.
	err = r.cmds.Apps.UpdateApp(ctx, c.ClientID, app.Metadata{Name: "Sneaky", RedirectURIs: []string{"https://evil.example/cb"}, Scopes: []string{"openid"}})
	if !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("edit of an approved app: %v", err)
	}
}

func TestConcurrentRefreshOneWins(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	c := r.app(owner, "openid", "workspace:read")
	tok := r.tokens(r.browser(), c, owner, ws, "workspace:read")
	rt := tok["refresh_token"].(string)
	const n = 8
	var wg sync.WaitGroup
	codes := make([]int, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i], _ = r.refresh(c, rt)
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, st := range codes {
		if st == 200 {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d concurrent refreshes succeeded (%v), want exactly 1", ok, n, codes)
	}
}

func TestLoginThrottle(t *testing.T) {
	r := newRig(t)
	u := r.user(false)
	for i := range 5 {
		if st, _ := r.api("POST", "/v1/auth/login", "", map[string]any{"email": u.Email, "password": "wrong-password"}); st != 401 {
			t.Fatalf("attempt %d: %d", i, st)
		}
	}
	// The account is locked for the window, even with the right password.
	if st, body := r.api("POST", "/v1/auth/login", "", map[string]any{"email": u.Email, "password": testPassword}); st != 429 {
		t.Fatalf("after 5 failures: %d %v", st, body)
	}
	r.clock.Advance(16 * time.Minute)
	if st, _ := r.api("POST", "/v1/auth/login", "", map[string]any{"email": u.Email, "password": testPassword}); st != 200 {
		t.Fatalf("after the window: %d", st)
	}
	// Sign-out ends the session for the bearer token at once.
	b := r.browser()
	lp := b.do("GET", "/login", nil)
	f := hidden(lp.body)
	f.Set("email", u.Email)
	f.Set("password", testPassword)
	if p := b.do("POST", "/login", f); p.status != http.StatusSeeOther {
		t.Fatalf("browser sign-in: %d", p.status)
	}
	out := b.do("GET", "/logout", nil)
	if p := b.do("POST", "/logout", hidden(out.body)); p.status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.status)
	}
}
