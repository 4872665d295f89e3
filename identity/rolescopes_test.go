package identity_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/switchyard/switchyard/commands"
)

// workflowDef is a minimal valid workflow definition for the workspace endpoints.
func workflowDef(name string) map[string]any {
	var d map[string]any
	_ = json.Unmarshal([]byte(`{"name": "`+name+`", "components": [
		{"id": "t", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "a", "module": "core.echo", "position": [100, 50]}],
	  "edges": [{"from": "t", "to": "a"}]}`), &d)
	return d
}

// adminCalls are the workspace endpoints that need workspace:admin or workspace:api_keys,
// each with a body that succeeds for a caller holding the power.
func adminCalls(ws string) []struct {
	name, path string
	body       any
} {
	return []struct {
		name, path string
		body       any
	}{
		{"api key", "/v1/workspaces/" + ws + "/api-keys", map[string]any{"label": "k"}},
		{"mcp token", "/v1/workspaces/" + ws + "/mcp-tokens", map[string]any{"label": "m"}},
		{"workflow", "/v1/workspaces/" + ws + "/workflows", workflowDef("From a token")},
	}
}

// TestMemberConsentCannotGrantAdminPowers: a member who consents to an app asking for
// workspace:admin and workspace:api_keys is told on the consent page that those are not
// granted, the token carries only what a member holds, and each admin endpoint answers 403.
func TestMemberConsentCannotGrantAdminPowers(t *testing.T) {
	r := newRig(t)
	owner, member := r.user(false), r.user(false)
	ws := r.workspace(owner, 3)
	if err := r.cmds.Workspaces.AddMember(context.Background(), ws, member.Email, "member"); err != nil {
		t.Fatal(err)
	}
	r.env.CaughtUp(t, "workspaces")
	c := r.app(owner, "openid", "workspace:read", "workspace:admin", "workspace:api_keys")

	verifier := oauth2.GenerateVerifier()
	b := r.browser()
	page := b.consent(r.authURL(c, "openid workspace:read workspace:admin workspace:api_keys",
		oauth2.S256ChallengeFromVerifier(verifier), "S256"), member, ws)
	_, withheld, _ := strings.Cut(page.body, `id="withheld"`)
	withheld, _, _ = strings.Cut(withheld, "</div>")
	if !strings.Contains(withheld, "<code>workspace:admin</code>") || !strings.Contains(withheld, "<code>workspace:api_keys</code>") ||
		strings.Contains(withheld, "<code>workspace:read</code>") || !strings.Contains(withheld, "<strong>member</strong>") {
		t.Fatalf("consent page does not say which scopes are withheld and why:\n%s", page.body)
	}
	back := b.decide(page, true)
	st, tok := r.exchange(c, back.Get("code"), verifier)
	if st != 200 {
		t.Fatalf("exchange: %d %v", st, tok)
	}
	if got := scopeSet(tok["scope"]); strings.Join(got, " ") != "openid workspace:read" {
		t.Fatalf("granted scope = %v, want openid workspace:read", got)
	}
	at := tok["access_token"].(string)
	for _, call := range adminCalls(ws) {
		if st, body := r.api("POST", call.path, at, call.body); st != http.StatusForbidden {
			t.Errorf("%s with a member's token: %d %v", call.name, st, body)
		}
	}
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", at, nil); st != 200 {
		t.Fatalf("a member's token reads: %d", st)
	}

	// An app asking only for powers beyond the role gets no Allow button, and a forged approval
	// is refused back to the app.
	only := b.consent(r.authURL(c, "workspace:admin", oauth2.S256ChallengeFromVerifier(verifier), "S256"), member, ws)
	if strings.Contains(only.body, `id="approve"`) {
		t.Fatalf("consent offers Allow with nothing to grant:\n%s", only.body)
	}
	if q := b.decide(only, true); q.Get("error") != "access_denied" || q.Get("code") != "" {
		t.Fatalf("approval of nothing grantable: %v", q)
	}
}

// TestDemotionTakesEffectOnTheNextCall: an admin's token with workspace:admin works while
// they are admin; once they are demoted to member the same token is refused on each admin
// endpoint at its next call and keeps what a member may do.
func TestDemotionTakesEffectOnTheNextCall(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	owner, admin := r.user(false), r.user(false)
	ws := r.workspace(owner, 3)
	if err := r.cmds.Workspaces.AddMember(ctx, ws, admin.Email, "admin"); err != nil {
		t.Fatal(err)
	}
	r.env.CaughtUp(t, "workspaces")
	c := r.app(owner, "openid", "workspace:admin")
	tok := r.tokens(r.browser(), c, admin, ws, "openid workspace:admin")
	if got := scopeSet(tok["scope"]); strings.Join(got, " ") != "openid workspace:admin" {
		t.Fatalf("an admin's grant: %v", got)
	}
	at := tok["access_token"].(string)
	calls := adminCalls(ws)
	for _, call := range calls[:2] {
		if st, body := r.api("POST", call.path, at, call.body); st != http.StatusCreated {
			t.Fatalf("%s while admin: %d %v", call.name, st, body)
		}
	}

	if err := r.cmds.Workspaces.ChangeMemberRole(ctx, commands.MemberChange{WorkspaceID: ws, Email: admin.Email, Role: "member", Operator: true}); err != nil {
		t.Fatal(err)
	}
	for _, call := range calls {
		if st, body := r.api("POST", call.path, at, call.body); st != http.StatusForbidden {
			t.Errorf("%s after demotion: %d %v", call.name, st, body)
		}
	}
	for _, path := range []string{"/workflows", "/billing"} {
		if st, body := r.api("GET", "/v1/workspaces/"+ws+path, at, nil); st != 200 {
			t.Errorf("GET %s after demotion (a member reads): %d %v", path, st, body)
		}
	}
}
