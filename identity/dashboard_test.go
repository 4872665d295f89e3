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
	if p := sb.do("POST", "/review", reviewForm(q.body, clientID, "approve")); p.status != 200 {
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

// reviewForm is the review page's form of one app, with the action.
func reviewForm(body, clientID, action string) url.Values {
	f := url.Values{"csrf_token": {hidden(body).Get("csrf_token")}, "client_id": {clientID}, "action": {action}}
	if m := regexp.MustCompile(`name="client_id" value="` + clientID + `"><input type="hidden" name="revision" value="(\d+)"`).FindStringSubmatch(body); m != nil {
		f.Set("revision", m[1])
	}
	return f
}

// TestReviewApprovesTheRevisionSeen: a developer edits a submitted app while it waits (which
// takes it back to draft) and submits it again; the reviewer's approval from the page loaded
// before is refused, the page says why and shows the app as it is now; approving that works.
func TestReviewApprovesTheRevisionSeen(t *testing.T) {
	r := newRig(t)
	dev, staff := r.user(false), r.user(true)
	b, sb := r.browser(), r.browser()
	b.signIn(dev)
	sb.signIn(staff)
	f := hidden(b.do("GET", "/developer/apps", nil).body)
	f.Set("name", "Honest Reports")
	f.Set("redirect_uris", "https://honest.example/cb")
	f["scopes"] = []string{"openid", "workspace:read"}
	created := b.do("POST", "/developer/apps", f)
	clientID := strings.TrimPrefix(created.location, "/developer/apps/")
	form := func(action string, extra url.Values) url.Values {
		v := url.Values{"csrf_token": {hidden(b.do("GET", created.location, nil).body).Get("csrf_token")}, "action": {action}}
		for k, x := range extra {
			v[k] = x
		}
		return v
	}
	if p := b.do("POST", created.location, form("submit", nil)); p.status != 200 {
		t.Fatalf("submit: %d", p.status)
	}
	r.env.CaughtUp(t, "apps")
	seen := sb.do("GET", "/review", nil)
	if !strings.Contains(seen.body, "Honest Reports") || reviewForm(seen.body, clientID, "approve").Get("revision") != "1" {
		t.Fatalf("review page does not carry revision 1:\n%s", seen.body)
	}

	swap := url.Values{"name": {"Evil Reports"}, "redirect_uris": {"https://evil.example/cb"}, "scopes": {"openid", "workspace:admin"}}
	edited := b.do("POST", created.location, form("edit", swap))
	if edited.status != 200 || !strings.Contains(edited.body, "out of the review queue") {
		t.Fatalf("edit of a submitted app: %d %s", edited.status, edited.body)
	}
	if a, _ := r.cmds.Apps.App(t.Context(), clientID); a.Status != "draft" || a.Revision != 2 {
		t.Fatalf("after the edit: status %s revision %d, want draft 2", a.Status, a.Revision)
	}
	// Approving what was seen, while the edit is a draft, and after it was submitted again.
	for _, resubmit := range []bool{false, true} {
		if resubmit {
			if p := b.do("POST", created.location, form("submit", nil)); p.status != 200 {
				t.Fatalf("submit again: %d", p.status)
			}
		}
		p := sb.do("POST", "/review", reviewForm(seen.body, clientID, "approve"))
		if p.status != http.StatusConflict || !strings.Contains(p.body, "changed after this page was loaded") {
			t.Fatalf("approve of the revision seen (resubmitted %v): %d %s", resubmit, p.status, p.body)
		}
		if a, _ := r.cmds.Apps.App(t.Context(), clientID); a.Live() {
			t.Fatal("the edited app went live")
		}
	}
	r.env.CaughtUp(t, "apps")
	now := sb.do("GET", "/review", nil)
	if !strings.Contains(now.body, "Evil Reports") || reviewForm(now.body, clientID, "approve").Get("revision") != "2" {
		t.Fatalf("review page after the edit:\n%s", now.body)
	}
	if p := sb.do("POST", "/review", reviewForm(now.body, clientID, "approve")); p.status != 200 {
		t.Fatalf("approve of the current revision: %d", p.status)
	}
	if a, _ := r.cmds.Apps.App(t.Context(), clientID); !a.Live() || a.Metadata.Name != "Evil Reports" {
		t.Fatalf("after approval: %+v", a)
	}
	// The JSON twin names the revision too.
	_, login := r.api("POST", "/v1/auth/login", "", map[string]any{"email": staff.Email, "password": testPassword})
	if st, body := r.api("POST", "/v1/review/apps/"+clientID+"/approve", login["token"].(string), map[string]any{}); st != 400 || !strings.Contains(body["message"].(string), "revision") {
		t.Fatalf("API approve without a revision: %d %v", st, body)
	}
	// A reason is text checked as sent, as every JSON body is: a lone surrogate is a 400 naming it.
	if st, body := r.rawAPI("POST", "/v1/review/apps/"+clientID+"/revert", login["token"].(string), `{"reason":"\ud800"}`); st != 400 || !strings.Contains(body["message"].(string), "reason") {
		t.Fatalf("API revert with a lone surrogate in its reason: %d %v", st, body)
	}
}
