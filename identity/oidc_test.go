package identity_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

func randomString() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestRelyingParty runs the whole flow as a third-party app would, with go-oidc and x/oauth2
// (not this project's code): discovery, code + PKCE, ID token verification against the JWKS,
// refresh, the three workspace endpoints, revocation and the 401 after it; then a replay of a
// rotated refresh token revokes the chain.
func TestRelyingParty(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	owner := r.user(false)
	ws := r.workspace(owner, 25)
	client := r.app(owner, "openid", "email", "profile", "workspace:read", "workspace:read.billing", "workspace:api_keys")

	provider, err := oidc.NewProvider(ctx, r.issuer)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	cfg := oauth2.Config{ClientID: client.ClientID, ClientSecret: client.Secret, Endpoint: provider.Endpoint(),
		RedirectURL: client.RedirectURI, Scopes: []string{oidc.ScopeOpenID, "email", "workspace:read", "workspace:read.billing", "workspace:api_keys"}}
	verifier := oauth2.GenerateVerifier()
	state, nonce := randomString(), randomString()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))

	back := r.browser().authorize(authURL, owner, ws, true)
	if back.Get("state") != state || back.Get("iss") != r.issuer || back.Get("code") == "" {
		t.Fatalf("redirect back: %v", back)
	}
	tok, err := cfg.Exchange(ctx, back.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	rawID, _ := tok.Extra("id_token").(string)
	idt, err := provider.Verifier(&oidc.Config{ClientID: client.ClientID}).Verify(ctx, rawID)
	if err != nil {
		t.Fatalf("verify ID token: %v", err)
	}
	if idt.Nonce != nonce || idt.Subject != owner.ID {
		t.Fatalf("ID token nonce %q subject %q", idt.Nonce, idt.Subject)
	}
	if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
		t.Fatalf("at_hash: %v", err)
	}
	var claims struct {
		Email    string `json:"email"`
		AuthTime int64  `json:"auth_time"`
	}
	if err := idt.Claims(&claims); err != nil || claims.Email != owner.Email || claims.AuthTime == 0 {
		t.Fatalf("ID token claims %+v %v", claims, err)
	}
	// The access token is verifiable offline against the JWKS too, with exactly the SPEC.md 2.11 claims.
	atv := provider.Verifier(&oidc.Config{ClientID: client.ClientID})
	at, err := atv.Verify(ctx, tok.AccessToken)
	if err != nil {
		t.Fatalf("verify access token offline: %v", err)
	}
	var ac map[string]any
	_ = at.Claims(&ac)
	for _, k := range []string{"sub", "aud", "client_id", "workspace_id", "scope", "iat", "exp", "iss", "jti"} {
		if _, ok := ac[k]; !ok {
			t.Errorf("access token lacks %s: %v", k, ac)
		}
	}
	if len(ac) != 9 || ac["workspace_id"] != ws || ac["client_id"] != client.ClientID || ac["aud"] != client.ClientID {
		t.Errorf("access token claims: %v", ac)
	}
	ui, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil || ui.Subject != owner.ID || ui.Email != owner.Email {
		t.Fatalf("userinfo: %+v %v", ui, err)
	}

	// Refresh: a new pair, the old refresh token stops working.
	first := tok.RefreshToken
	tok2, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: first, Expiry: time.Now().Add(-time.Hour)}).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if tok2.RefreshToken == "" || tok2.RefreshToken == first || tok2.AccessToken == tok.AccessToken {
		t.Fatalf("refresh did not rotate: %+v", tok2)
	}
	if _, err := provider.Verifier(&oidc.Config{ClientID: client.ClientID}).Verify(ctx, tok2.Extra("id_token").(string)); err != nil {
		t.Fatalf("refreshed ID token: %v", err)
	}

	// The three workspace endpoints.
	access := tok2.AccessToken
	st, bal := r.api("GET", "/v1/workspaces/"+ws+"/billing", access, nil)
	if st != 200 || bal["credit"] != 25.0 || bal["usage"] != 0.0 || bal["total"] != 25.0 {
		t.Fatalf("billing: %d %v", st, bal)
	}
	st, wf := r.api("GET", "/v1/workspaces/"+ws+"/workflows?page=1&limit=10", access, nil)
	if st != 200 || wf["total"] != 0.0 || wf["page"] != 1.0 || wf["totalPages"] != 0.0 || wf["data"] == nil {
		t.Fatalf("workflows: %d %v", st, wf)
	}
	r.env.CaughtUp(t, "billing")
	st, tx := r.api("GET", "/v1/workspaces/"+ws+"/billing/transactions", access, nil)
	if st != 200 || tx["total"] != 1.0 {
		t.Fatalf("transactions: %d %v", st, tx)
	}
	st, key := r.api("POST", "/v1/workspaces/"+ws+"/api-keys", access, map[string]any{"label": "from oauth", "allowedWorkflowIds": []string{}, "expiresAt": nil})
	if st != http.StatusCreated || !strings.HasPrefix(key["apiKey"].(string), "ws_") || key["apiSecret"] == "" || key["label"] != "from oauth" {
		t.Fatalf("api key: %d %v", st, key)
	}
	// SPEC.md 5 rule 9: the minted key is live at once.
	if k, err := r.cmds.Workspaces.APIKey(ctx, key["id"].(string)); err != nil || k.WorkspaceID != ws || !k.Usable(time.Now()) {
		t.Fatalf("minted key: %+v %v", k, err)
	}

	// Revoke the refresh token: the access token is refused at once.
	st, _ = r.form("/oauth/revoke", client, url.Values{"token": {tok2.RefreshToken}, "token_type_hint": {"refresh_token"}})
	if st != 200 {
		t.Fatalf("revoke: %d", st)
	}
	if st, body := r.api("GET", "/v1/workspaces/"+ws+"/billing", access, nil); st != 401 || body["statusCode"] != 401.0 {
		t.Fatalf("after revoke: %d %v", st, body)
	}
	if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok2.RefreshToken, Expiry: time.Now().Add(-time.Hour)}).Token(); err == nil {
		t.Fatal("revoked refresh token still works")
	}
	// Unknown tokens revoke quietly (RFC 7009).
	if st, _ := r.form("/oauth/revoke", client, url.Values{"token": {"nonsense"}}); st != 200 {
		t.Fatalf("revoke unknown: %d", st)
	}

	// A second authorization (another workspace) and a replay of its rotated refresh token.
	ws2 := r.workspace(owner, 1)
	verifier = oauth2.GenerateVerifier()
	back = r.browser().authorize(cfg.AuthCodeURL("s2", oauth2.S256ChallengeOption(verifier)), owner, ws2, true)
	tokA, err := cfg.Exchange(ctx, back.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tokA.RefreshToken, Expiry: time.Now().Add(-time.Hour)}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := r.api("GET", "/v1/workspaces/"+ws2+"/billing", tokB.AccessToken, nil); st != 200 {
		t.Fatalf("second authorization: %d", st)
	}
	// Replay the rotated token: refused, and the whole chain (tokB too) is revoked.
	if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tokA.RefreshToken, Expiry: time.Now().Add(-time.Hour)}).Token(); err == nil {
		t.Fatal("rotated refresh token accepted")
	}
	if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tokB.RefreshToken, Expiry: time.Now().Add(-time.Hour)}).Token(); err == nil {
		t.Fatal("chain not revoked after replay: the current refresh token still works")
	}
	if st, _ := r.api("GET", "/v1/workspaces/"+ws2+"/billing", tokB.AccessToken, nil); st != 401 {
		t.Fatalf("access token after replay: %d", st)
	}
}
