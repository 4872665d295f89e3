package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestIdentityCommands drives `admin app create` and `admin keys rotate` through the built
// binary, then checks the running service publishes what they recorded.
func TestIdentityCommands(t *testing.T) {
	c := newCLI(t)
	c.ok("migrate")
	c.ok("admin", "user", "create", "--email", "dev@example.com", "--password", "password-123")
	// A look-alike of that address (a Cyrillic е) is refused, naming the field.
	if res := c.run("admin", "user", "create", "--email", "dеv@example.com", "--password", "password-123"); res.code == 0 ||
		!strings.Contains(res.stderr, "email: the part before @ mixes scripts") {
		t.Fatalf("look-alike user created: %s", res)
	}

	res := c.ok("admin", "app", "create", "--owner", "dev@example.com", "--name", "Acme", "--redirect-uri", "https://acme.example/cb",
		"--redirect-uri", "http://127.0.0.1:7777/cb", "--scope", "openid", "--scope", "workspace:read", "--approve", "--json")
	var created map[string]string
	if err := json.Unmarshal([]byte(res.stdout), &created); err != nil || len(created) != 2 || created["clientId"] == "" ||
		!strings.HasPrefix(created["clientSecret"], "sys_") {
		t.Fatalf("app create output: %v\n%s", err, res)
	}
	if res := c.run("admin", "app", "create", "--owner", "dev@example.com", "--name", "Bad", "--redirect-uri", "http://acme.example/cb",
		"--scope", "openid", "--json"); res.code == 0 || !strings.Contains(res.stderr, "http is allowed only for localhost") {
		t.Fatalf("http redirect URI accepted: %s", res)
	}
	var k1, k2 map[string]string
	c.okJSON(&k1, "admin", "keys", "rotate", "--json")
	c.okJSON(&k2, "admin", "keys", "rotate", "--json")
	if k1["kid"] == "" || k2["previousKid"] != k1["kid"] || k2["kid"] == k1["kid"] {
		t.Fatalf("rotations: %v then %v", k1, k2)
	}

	s := c.serve()
	_, body := c.waitHTTP(s, "/.well-known/openid-configuration", 30*time.Second, func(st int, _ string) bool { return st == 200 })
	var disc map[string]any
	if err := json.Unmarshal([]byte(body), &disc); err != nil || disc["issuer"] != c.url("") || disc["jwks_uri"] != c.url("/.well-known/jwks.json") {
		t.Fatalf("discovery: %v %s", err, body)
	}
	_, body = c.waitHTTP(s, "/.well-known/jwks.json", 10*time.Second, func(st int, _ string) bool { return st == 200 })
	var set struct{ Keys []struct{ Kid string } }
	_ = json.Unmarshal([]byte(body), &set)
	if len(set.Keys) != 2 || set.Keys[0].Kid != k2["kid"] || set.Keys[1].Kid != k1["kid"] {
		t.Fatalf("jwks: %s", body)
	}
	// The secret authenticates (the made-up code is then invalid_grant), a wrong one does not.
	token := func(secret string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", c.url("/oauth/token"), strings.NewReader(url.Values{"grant_type": {"authorization_code"},
			"code": {"x"}, "code_verifier": {strings.Repeat("v", 43)}, "redirect_uri": {"https://acme.example/cb"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(created["clientId"], secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if st, out := token(created["clientSecret"]); st != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("token with the secret: %d %v", st, out)
	}
	if st, out := token("sys_wrong"); st != 401 || out["error"] != "invalid_client" {
		t.Fatalf("token with a wrong secret: %d %v", st, out)
	}
	approveNamesTheRevision(t, c)
	s.stop(t, 30*time.Second)
}

// approveNamesTheRevision: `admin app approve --revision` refuses a revision the developer has
// replaced since, and approves the current one; without --revision it approves the current one.
func approveNamesTheRevision(t *testing.T, c *cli) {
	var draft map[string]string
	c.okJSON(&draft, "admin", "app", "create", "--owner", "dev@example.com", "--name", "Beta", "--redirect-uri", "https://beta.example/cb",
		"--scope", "openid", "--json")
	api := func(method, path, session, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, c.url(path), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set("Authorization", "Bearer "+session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	_, login := api("POST", "/v1/auth/login", "", `{"email":"dev@example.com","password":"password-123"}`)
	session, _ := login["token"].(string)
	appPath := "/v1/developer/apps/" + draft["clientId"]
	for _, step := range []struct{ method, path, body string }{
		{"POST", appPath + "/submit", ""},
		{"PATCH", appPath, `{"name":"Beta, renamed","redirectUris":["https://evil.example/cb"],"scopes":["openid"]}`},
		{"POST", appPath + "/submit", ""},
	} {
		if st, out := api(step.method, step.path, session, step.body); st != 200 {
			t.Fatalf("%s %s: %d %v", step.method, step.path, st, out)
		}
	}
	if res := c.run("admin", "app", "approve", "--client-id", draft["clientId"], "--revision", "1"); res.code == 0 ||
		!strings.Contains(res.stderr, "changed since it was reviewed") {
		t.Fatalf("approve of a replaced revision: %s", res)
	}
	var approved map[string]any
	c.okJSON(&approved, "admin", "app", "approve", "--client-id", draft["clientId"], "--revision", "2", "--json")
	if approved["status"] != "approved" || approved["revision"] != 2.0 {
		t.Fatalf("approve of the current revision: %v", approved)
	}
	res := c.ok("admin", "app", "create", "--owner", "dev@example.com", "--name", "Gamma", "--redirect-uri", "https://gamma.example/cb",
		"--scope", "openid", "--json")
	var gamma map[string]string
	_ = json.Unmarshal([]byte(res.stdout), &gamma)
	if st, out := api("POST", "/v1/developer/apps/"+gamma["clientId"]+"/submit", session, ""); st != 200 {
		t.Fatalf("submit gamma: %d %v", st, out)
	}
	if res := c.ok("admin", "app", "approve", "--client-id", gamma["clientId"]); !strings.Contains(res.stderr, `approving revision 1 of `+gamma["clientId"]+`: name "Gamma"`) ||
		!strings.Contains(res.stdout, "is approved (revision 1)") {
		t.Fatalf("approve without --revision: %s", res)
	}
}
