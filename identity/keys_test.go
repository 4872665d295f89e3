package identity_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

func kidOf(t *testing.T, jwt string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Kid, Alg string
	}
	_ = json.Unmarshal(b, &h)
	if h.Alg != "RS256" {
		t.Fatalf("alg %q", h.Alg)
	}
	return h.Kid
}

func (r *rig) jwksKids() []string {
	r.t.Helper()
	resp, err := http.Get(r.issuer + "/.well-known/jwks.json")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct{ Kid, Kty, Alg, Use, N, E string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, k := range set.Keys {
		if k.Kty != "RSA" || k.Alg != "RS256" || k.Use != "sig" || k.N == "" || k.E == "" {
			r.t.Fatalf("jwk %+v", k)
		}
		out = append(out, k.Kid)
	}
	return out
}

// TestKeyRotation: tokens signed by the old key still verify after a rotation, new tokens carry
// the new kid, and the old key leaves the JWKS once every token it signed has expired.
func TestKeyRotation(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	c := r.app(owner, "openid", "workspace:read")
	b := r.browser()
	oldTok := r.tokens(b, c, owner, ws, "openid workspace:read")
	oldKid := kidOf(t, oldTok["access_token"].(string))
	if kids := r.jwksKids(); len(kids) != 1 || kids[0] != oldKid {
		t.Fatalf("jwks before rotation: %v (token kid %s)", kids, oldKid)
	}

	newKid, err := r.idp.Keys().Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newKid == oldKid {
		t.Fatal("rotation kept the kid")
	}
	kids := r.jwksKids()
	if len(kids) != 2 || kids[0] != newKid || kids[1] != oldKid {
		t.Fatalf("jwks after rotation: %v", kids)
	}
	// The old token still works, on the workspace endpoints and for an offline verifier.
	if st, _ := r.api("GET", "/v1/workspaces/"+ws+"/workflows", oldTok["access_token"].(string), nil); st != 200 {
		t.Fatalf("old token after rotation: %d", st)
	}
	provider, err := oidc.NewProvider(ctx, r.issuer)
	if err != nil {
		t.Fatal(err)
	}
	v := provider.Verifier(&oidc.Config{ClientID: c.ClientID, Now: r.clock.Now})
	if _, err := v.Verify(ctx, oldTok["id_token"].(string)); err != nil {
		t.Fatalf("old ID token after rotation: %v", err)
	}
	// New tokens carry the new kid and verify too.
	st, newTok := r.refresh(c, oldTok["refresh_token"].(string))
	if st != 200 || kidOf(t, newTok["access_token"].(string)) != newKid || kidOf(t, newTok["id_token"].(string)) != newKid {
		t.Fatalf("refreshed tokens: %d kid %s", st, kidOf(t, newTok["access_token"].(string)))
	}
	if _, err := v.Verify(ctx, newTok["id_token"].(string)); err != nil {
		t.Fatalf("new ID token: %v", err)
	}
	// Another process sees the key without waiting for its projection or reload: a fresh ring
	// folds an unknown kid's stream on first sight.
	r2 := newRigOn(t, r)
	if st, _ := r2.api("GET", "/v1/workspaces/"+ws+"/workflows", newTok["access_token"].(string), nil); st != 200 {
		t.Fatalf("second process, new kid: %d", st)
	}

	// Once every token the old key signed has expired (the longest lifetime is the session's),
	// it is no longer published.
	r.clock.Advance(13 * time.Hour)
	if kids := r.jwksKids(); len(kids) != 1 || kids[0] != newKid {
		t.Fatalf("jwks after the old key's tokens expired: %v", kids)
	}
}
