package identity_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

// RFC 7662 section 4: introspection answers only authenticated confidential clients, and
// tells a client nothing about another client's tokens.
func TestIntrospectionAnswersOnlyTheCallersOwnTokens(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	mine := r.app(owner, "openid", "workspace:read")
	other := r.app(owner, "openid", "workspace:read")
	public := r.publicApp(owner, "openid", "workspace:read")
	tok := r.tokens(r.browser(), mine, owner, ws, "workspace:read")
	for _, kind := range []string{"access_token", "refresh_token"} {
		token := url.Values{"token": {tok[kind].(string)}}
		if st, intro := r.form("/oauth/introspect", mine, token); st != 200 || intro["active"] != true || intro["workspace_id"] != ws {
			t.Errorf("%s introspected by its own client: %d %v", kind, st, intro)
		}
		if st, intro := r.form("/oauth/introspect", other, token); st != 200 || intro["active"] != false || len(intro) != 1 {
			t.Errorf("%s introspected by another client: %d %v, want only active:false", kind, st, intro)
		}
		if st, intro := r.form("/oauth/introspect", public, token); st != 401 || intro["error"] != "invalid_client" {
			t.Errorf("%s introspected by a public client: %d %v, want 401 invalid_client", kind, st, intro)
		}
		if st, intro := r.form("/oauth/introspect", registered{}, token); st != 401 || intro["error"] != "invalid_client" {
			t.Errorf("%s introspected with no client: %d %v, want 401 invalid_client", kind, st, intro)
		}
	}
}

func scopeSet(s any) []string {
	str, _ := s.(string)
	f := strings.Fields(str)
	slices.Sort(f)
	return f
}

// RFC 6749 section 6: a refresh may narrow the scope, never widen it.
func TestRefreshNarrowsScopeAndRefusesWidening(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	c := r.app(owner, "openid", "workspace:read", "workspace:admin")
	tok := r.tokens(r.browser(), c, owner, ws, "openid workspace:read")
	rt := tok["refresh_token"].(string)
	refresh := func(token, scope string) (int, map[string]any) {
		return r.form("/oauth/token", c, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "scope": {scope}})
	}
	for _, wider := range []string{"openid workspace:read workspace:admin", "workspace:admin", "email"} {
		if st, body := refresh(rt, wider); st != 400 || body["error"] != "invalid_scope" {
			t.Fatalf("refresh asking for %q: %d %v, want 400 invalid_scope", wider, st, body)
		}
	}
	// The refusals did not use the refresh token up; a narrower scope is honoured.
	st, narrow := refresh(rt, "workspace:read")
	if st != 200 || !slices.Equal(scopeSet(narrow["scope"]), []string{"workspace:read"}) || narrow["id_token"] != nil {
		t.Fatalf("narrower refresh: %d %v", st, narrow)
	}
	if _, intro := r.form("/oauth/introspect", c, url.Values{"token": {narrow["access_token"].(string)}}); !slices.Equal(scopeSet(intro["scope"]), []string{"workspace:read"}) {
		t.Fatalf("the narrowed access token carries %v", intro["scope"])
	}
	// Without scope the grant is the original one.
	st, full := r.refresh(c, narrow["refresh_token"].(string))
	if st != 200 || !slices.Equal(scopeSet(full["scope"]), []string{"openid", "workspace:read"}) || full["id_token"] == nil {
		t.Fatalf("refresh without scope: %d %v", st, full)
	}
}
