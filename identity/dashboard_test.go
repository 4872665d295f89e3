package identity_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func (b *browser) signIn(who account) {
	b.t.Helper()
	lp := b.do("GET", "/login", nil)
	f := hidden(lp.body)
	f.Set("email", who.Email)
	f.Set("password", testPassword)
	if p := b.do("POST", "/login", f); p.status != http.StatusSeeOther {
		b.t.Fatalf("sign in: %d", p.status)
	}
}

// TestDashboardPages walks the developer dashboard, the staff review queue and the
// connected-apps page through their forms, as a user without JavaScript does.
func TestDashboardPages(t *testing.T) {
	r := newRig(t)
	dev := r.user(false)
	staff := r.user(true)
	ws := r.workspace(dev, 1)
	b := r.browser()
	if p := b.do("GET", "/developer/apps", nil); p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/login") {
		t.Fatalf("dashboard without a session: %d %q", p.status, p.location)
	}
	b.signIn(dev)
	p := b.do("GET", "/developer/apps", nil)
	f := hidden(p.body)
	f.Set("name", "Widget")
	f.Set("redirect_uris", "https://widget.example/cb\nhttp://localhost:8765/cb")
	f["scopes"] = []string{"openid", "workspace:read"}
	created := b.do("POST", "/developer/apps", f)
	if created.status != http.StatusSeeOther || !strings.HasPrefix(created.location, "/developer/apps/") {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	clientID := strings.TrimPrefix(created.location, "/developer/apps/")
	detail := b.do("GET", created.location, nil)
	act := func(action string, extra url.Values) page {
		f := url.Values{"csrf_token": {hidden(detail.body).Get("csrf_token")}, "action": {action}}
		for k, v := range extra {
			f[k] = v
		}
		return b.do("POST", created.location, f)
	}
	sec := act("secret", nil)
	m := regexp.MustCompile(`id="client-secret">(sys_[A-Za-z0-9_-]+)<`).FindStringSubmatch(sec.body)
	if sec.status != 200 || m == nil {
		t.Fatalf("issue secret: %d %s", sec.status, sec.body)
	}
	if again := b.do("GET", created.location, nil); strings.Contains(again.body, m[1]) {
		t.Fatal("the secret is shown twice")
	}
	if p := act("submit", nil); p.status != 200 || !strings.Contains(p.body, "submitted") {
		t.Fatalf("submit: %d", p.status)
	}

	// Staff approve from the queue.
	sb := r.browser()
	sb.signIn(staff)
	r.env.CaughtUp(t, "apps")
	q := sb.do("GET", "/review", nil)
	if q.status != 200 || !strings.Contains(q.body, "Widget") {
		t.Fatalf("review queue: %d", q.status)
	}
	if p := sb.do("POST", "/review", url.Values{"csrf_token": {hidden(q.body).Get("csrf_token")}, "client_id": {clientID}, "action": {"approve"}}); p.status != 200 {
		t.Fatalf("approve: %d", p.status)
	}
	if p := b.do("GET", "/review", nil); p.status != http.StatusForbidden {
		t.Fatalf("review queue for a developer: %d", p.status)
	}
	// Approved: an edit is a 409.
	if p := act("edit", url.Values{"name": {"Renamed"}, "redirect_uris": {"https://evil.example/cb"}, "scopes": {"openid"}}); p.status != http.StatusConflict {
		t.Fatalf("edit after approval: %d", p.status)
	}
	// The JSON twin says 409 too.
	_, login := r.api("POST", "/v1/auth/login", "", map[string]any{"email": dev.Email, "password": testPassword})
	st, body := r.api("PATCH", "/v1/developer/apps/"+clientID, login["token"].(string), map[string]any{"name": "Renamed",
		"redirectUris": []string{"https://widget.example/cb"}, "scopes": []string{"openid"}})
	if st != http.StatusConflict || body["statusCode"] != 409.0 {
		t.Fatalf("PATCH approved app: %d %v", st, body)
	}

	// Connected apps: the consent shows up and can be disconnected.
	c := registered{ClientID: clientID, Secret: m[1], RedirectURI: "https://widget.example/cb"}
	tok := r.tokens(b, c, dev, ws, "openid workspace:read")
	r.env.CaughtUp(t, "authorizations")
	ca := b.do("GET", "/workspaces/"+ws+"/connected-apps", nil)
	am := regexp.MustCompile(`name="authorization_id" value="([^"]+)"`).FindStringSubmatch(ca.body)
	if ca.status != 200 || am == nil || !strings.Contains(ca.body, "Widget") {
		t.Fatalf("connected apps: %d %s", ca.status, ca.body)
	}
	if p := b.do("POST", "/workspaces/"+ws+"/connected-apps", url.Values{"csrf_token": {hidden(ca.body).Get("csrf_token")}, "authorization_id": {am[1]}}); p.status != 200 || strings.Contains(p.body, am[1]) {
		t.Fatalf("disconnect: %d", p.status)
	}
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", tok["access_token"].(string), nil); st != 401 {
		t.Fatalf("token after disconnect: %d", st)
	}
}
