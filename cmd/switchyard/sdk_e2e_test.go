package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These tests are black-box: they run the built binary and speak raw HTTP with signing code of
// their own (not the project's client), as a third-party caller would.

// sdkKey is an API key as `admin bootstrap` and `admin apikey create` print it.
type sdkKey struct {
	WorkspaceID string `json:"workspaceId"`
	APIKeyID    string `json:"apiKeyId"`
	ID          string `json:"id"`
	APIKey      string `json:"apiKey"`
	APISecret   string `json:"apiSecret"`
}

type rawCaller struct {
	t    *testing.T
	base string
	key  sdkKey
	priv ed25519.PrivateKey
}

func newRawCaller(t *testing.T, base string, key sdkKey) *rawCaller {
	t.Helper()
	der, err := base64.StdEncoding.DecodeString(key.APISecret)
	if err != nil {
		t.Fatalf("apiSecret is not base64: %v", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		t.Fatalf("apiSecret is not PKCS#8: %v", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		t.Fatalf("apiSecret holds %T, want an Ed25519 key", k)
	}
	return &rawCaller{t: t, base: base, key: key, priv: priv}
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

func (r rawResponse) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// send signs METHOD|PATH|TIMESTAMP|BODY with ts and sends body (which may differ from signed,
// to tamper with it).
func (c *rawCaller) send(method, path string, signed, body []byte, ts time.Time, extra ...string) rawResponse {
	c.t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	msg := method + "|" + path + "|" + stamp + "|" + string(signed)
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(c.priv, []byte(msg)))
	return c.sendSigned(method, path, body, stamp, sig, extra...)
}

func (c *rawCaller) sendSigned(method, path string, body []byte, stamp, sig string, extra ...string) rawResponse {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", c.key.APIKey)
	req.Header.Set("X-Sdk-Timestamp", stamp)
	req.Header.Set("X-Sdk-Signature", sig)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: data}
}

func (c *rawCaller) do(method, path string, body []byte) rawResponse {
	c.t.Helper()
	return c.send(method, path, body, body, time.Now())
}

// submit posts a body; each call's target is unique (a nonce the endpoint ignores), since two
// identical POSTs in one second would be one signature, refused the second time as a replay.
func (c *rawCaller) submit(body string) rawResponse {
	c.t.Helper()
	return c.do(http.MethodPost, "/v1/sdk/components?nonce="+strconv.FormatInt(nonces.Add(1), 10), []byte(body))
}

var nonces atomic.Int64

// mustStatus fails unless r has status want, showing the body.
func mustStatus(t *testing.T, r rawResponse, want int, what string) {
	t.Helper()
	if r.status != want {
		t.Fatalf("%s: status %d, want %d: %s", what, r.status, want, r.body)
	}
}

// wantErrorBody checks the SPEC.md 7 error body.
func wantErrorBody(t *testing.T, r rawResponse, status int, message string) {
	t.Helper()
	mustStatus(t, r, status, "error "+message)
	m := r.json(t)
	if m["statusCode"] != float64(status) || m["error"] != http.StatusText(status) || m["message"] == nil {
		t.Fatalf("error body %s, want statusCode %d and error %q", r.body, status, http.StatusText(status))
	}
	if message != "" && !strings.Contains(fmt.Sprint(m["message"]), message) {
		t.Fatalf("error message %q, want it to contain %q", m["message"], message)
	}
}

// sdkService is a served binary with a bootstrapped workspace and key.
type sdkService struct {
	cli *cli
	srv *serveProcess
	key sdkKey
}

func startSDKService(t *testing.T, credits int, env ...string) *sdkService {
	t.Helper()
	c := newCLI(t)
	c.env = append(c.env, env...)
	c.ok("migrate")
	var key sdkKey
	c.okJSON(&key, "admin", "bootstrap", "--email", "owner@example.com", "--password", "password-123",
		"--workspace", "e2e", "--credits", strconv.Itoa(credits), "--json")
	if !strings.HasPrefix(key.APIKey, "ws_") || key.APISecret == "" || key.WorkspaceID == "" {
		t.Fatalf("bootstrap printed %+v", key)
	}
	return &sdkService{cli: c, srv: c.serveReady(), key: key}
}

// newKey mints another key for a workspace of the service.
func (s *sdkService) newKey(t *testing.T, workspaceID string, args ...string) sdkKey {
	t.Helper()
	var k sdkKey
	s.cli.okJSON(&k, append([]string{"admin", "apikey", "create", "--workspace", workspaceID, "--json"}, args...)...)
	k.WorkspaceID = workspaceID
	return k
}

func (s *sdkService) caller(t *testing.T, k sdkKey) *rawCaller {
	return newRawCaller(t, s.cli.url(""), k)
}

// pollExecution GETs the execution until done accepts it.
func pollExecution(t *testing.T, c *rawCaller, id string, within time.Duration, done func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := c.do(http.MethodGet, "/v1/sdk/components/executions/"+id, nil)
		if r.status == http.StatusTooManyRequests && time.Now().Before(deadline) {
			// A service started with a low rate limit (TestSDKExecutionsBlackBox's 20/s) refuses
			// polls past it on a slow machine: wait as the answer says, as a client would.
			time.Sleep(retryAfter(r))
			continue
		}
		mustStatus(t, r, http.StatusOK, "GET execution")
		m := r.json(t)
		if done(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s: condition not met within %s; last %s", id, within, r.body)
		}
		// Below the 20 requests/s some of these services are started with, so polling leaves
		// the key's bucket for the requests after it.
		time.Sleep(100 * time.Millisecond)
	}
}

// retryAfter is the wait a 429 asks for (its Retry-After, in seconds), one second without one.
func retryAfter(r rawResponse) time.Duration {
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return time.Second
}

func terminal(m map[string]any) bool { return m["status"] == "COMPLETED" || m["status"] == "FAILED" }

func TestSDKExecutionsBlackBox(t *testing.T) {
	svc := startSDKService(t, 100, "SWITCHYARD_CACHE_WINDOW=3s", "SWITCHYARD_RATE_LIMIT=20", "SWITCHYARD_RATE_BURST=40")
	c := svc.caller(t, svc.key)

	t.Run("submit without wait is CREATED", func(t *testing.T) {
		r := c.submit(`{"module":"core.echo","input":{"n":1},"config":{}}`)
		mustStatus(t, r, http.StatusOK, "submit")
		m := r.json(t)
		if m["status"] != "CREATED" || m["completed"] != false || m["output"] != nil || m["error"] != nil ||
			m["totalUsage"] != float64(0) || m["module"] != "core.echo" || m["id"] == "" {
			t.Fatalf("submit without wait: %s", r.body)
		}
		cb, ok := m["callback"].(map[string]any)
		if !ok || cb["url"] != nil || cb["signed"] != false || cb["signatureAlgorithm"] != nil || cb["attemptCount"] != float64(0) ||
			cb["lastAttemptAt"] != nil || cb["deliveredAt"] != nil || cb["lastError"] != nil {
			t.Fatalf("callback object: %s", r.body)
		}
		if h, ok := cb["headerNames"].([]any); !ok || len(h) != 0 {
			t.Fatalf("headerNames must be an empty array: %s", r.body)
		}
		for _, f := range []string{"createdAt", "updatedAt"} {
			if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m[f])); err != nil {
				t.Fatalf("%s is not an ISO 8601 timestamp: %s", f, r.body)
			}
		}
		done := pollExecution(t, c, fmt.Sprint(m["id"]), 30*time.Second, terminal)
		if done["status"] != "COMPLETED" || done["totalUsage"] != float64(1) {
			t.Fatalf("the execution must complete in the background: %v", done)
		}
	})

	t.Run("waitForMs answers COMPLETED and GET agrees", func(t *testing.T) {
		r := c.submit(`{"module":"text.template","input":{"name":"Ada"},"config":{"template":"Hello {{.name}}"},"waitForMs":10000}`)
		mustStatus(t, r, http.StatusOK, "submit with wait")
		m := r.json(t)
		if m["status"] != "COMPLETED" || m["completed"] != true || m["output"] == nil || m["totalUsage"].(float64) <= 0 {
			t.Fatalf("submit with waitForMs: %s", r.body)
		}
		g := c.do(http.MethodGet, "/v1/sdk/components/executions/"+fmt.Sprint(m["id"]), nil)
		mustStatus(t, g, http.StatusOK, "GET")
		if !bytes.Equal(bytes.TrimSpace(g.body), bytes.TrimSpace(r.body)) {
			t.Fatalf("GET differs from the submit's answer:\n%s\n%s", g.body, r.body)
		}
	})

	t.Run("core.fail uses three attempts", func(t *testing.T) {
		r := c.submit(`{"module":"core.fail","input":{},"config":{"message":"always"},"attempts":3,"waitForMs":15000}`)
		mustStatus(t, r, http.StatusOK, "submit core.fail")
		m := pollExecution(t, c, fmt.Sprint(r.json(t)["id"]), 30*time.Second, terminal)
		if m["status"] != "FAILED" || m["completed"] != false || m["output"] != nil || m["totalUsage"] != float64(0) {
			t.Fatalf("core.fail: %v", m)
		}
		if e, ok := m["error"].(map[string]any); !ok || e["message"] != "always" {
			t.Fatalf("error of core.fail: %v", m["error"])
		}
		// The third attempt is the one that succeeds: proof that three attempts ran.
		r = c.submit(`{"module":"core.fail","input":{"ok":true},"config":{"succeedOnAttempt":3},"attempts":3,"waitForMs":15000}`)
		m = pollExecution(t, c, fmt.Sprint(r.json(t)["id"]), 30*time.Second, terminal)
		if m["status"] != "COMPLETED" {
			t.Fatalf("succeedOnAttempt 3 with attempts 3 must complete: %v", m)
		}
	})

	t.Run("validation names the field", func(t *testing.T) {
		for body, field := range map[string]string{
			`{"input":{},"config":{}}`:                                                         "module",
			`{"module":"core.echo","config":{}}`:                                               "input",
			`{"module":"core.echo","input":{},"config":{},"attempts":4}`:                       "attempts",
			`{"module":"core.echo","input":{},"config":{},"waitForMs":15001}`:                  "waitForMs",
			`{"module":"nope.nope","input":{},"config":{}}`:                                    "module",
			`{"module":"core.echo","input":{},"config":{},"callbackUrl":"http://example.com"}`: "callbackUrl",
			`{"module":"core.echo","input":{},"config":{},"wiatForMs":1}`:                      "wiatForMs",
			`[1,2]`: "body",
		} {
			wantErrorBody(t, c.submit(body), http.StatusBadRequest, field)
		}
	})

	t.Run("another workspace's execution is 404", func(t *testing.T) {
		other := svc.cli.run("admin", "workspace", "create", "--name", "other", "--owner", "owner@example.com", "--json")
		var ws struct {
			WorkspaceID string `json:"workspaceId"`
		}
		if err := json.Unmarshal([]byte(other.stdout), &ws); err != nil {
			t.Fatalf("workspace create: %s", other)
		}
		oc := svc.caller(t, svc.newKey(t, ws.WorkspaceID))
		r := c.submit(`{"module":"core.echo","input":{"private":true},"config":{}}`)
		wantErrorBody(t, oc.do(http.MethodGet, "/v1/sdk/components/executions/"+fmt.Sprint(r.json(t)["id"]), nil), http.StatusNotFound, "")
		// That workspace has no credits: 402.
		wantErrorBody(t, oc.submit(`{"module":"core.echo","input":{},"config":{}}`), http.StatusPaymentRequired, "")
	})

	t.Run("authentication failures are 401", func(t *testing.T) {
		body := []byte(`{"module":"core.echo","input":{"auth":1},"config":{}}`)
		tampered := []byte(`{"module":"core.echo","input":{"auth":2},"config":{}}`)
		wantErrorBody(t, c.send(http.MethodPost, "/v1/sdk/components", body, tampered, time.Now()), http.StatusUnauthorized, "invalid signature")
		wantErrorBody(t, c.send(http.MethodPost, "/v1/sdk/components", body, body, time.Now().Add(-10*time.Minute)), http.StatusUnauthorized, "expired timestamp")
		stamp := strconv.FormatInt(time.Now().Unix(), 10)
		sig := base64.StdEncoding.EncodeToString(ed25519.Sign(c.priv, []byte("POST|/v1/sdk/components|"+stamp+"|"+string(body))))
		mustStatus(t, c.sendSigned(http.MethodPost, "/v1/sdk/components", body, stamp, sig), http.StatusOK, "first use of a signature")
		wantErrorBody(t, c.sendSigned(http.MethodPost, "/v1/sdk/components", body, stamp, sig), http.StatusUnauthorized, "")
		unknown := *c
		unknown.key.APIKey = "ws_unknown"
		wantErrorBody(t, unknown.do(http.MethodGet, "/v1/sdk/modules", nil), http.StatusUnauthorized, "invalid API key")

		revoked := svc.caller(t, svc.newKey(t, svc.key.WorkspaceID))
		mustStatus(t, revoked.do(http.MethodGet, "/v1/sdk/modules", nil), http.StatusOK, "a fresh key")
		svc.cli.ok("admin", "apikey", "revoke", "--id", revoked.key.ID)
		waitStatus(t, revoked, http.StatusUnauthorized, 10*time.Second, "revoked key")

		// The expiry is far enough ahead that a CLI slowed by a busy machine (a second or two)
		// still creates the key before it; the key is seen to work if asked before it expires,
		// and to fail after.
		expiresAt := time.Now().Add(6 * time.Second).Truncate(time.Second)
		expiring := svc.caller(t, svc.newKey(t, svc.key.WorkspaceID, "--expires-at", expiresAt.UTC().Format(time.RFC3339)))
		if r := expiring.do(http.MethodGet, "/v1/sdk/modules", nil); time.Now().Before(expiresAt) && r.status != http.StatusOK {
			t.Fatalf("a key before its expiry: %d %s", r.status, r.body)
		}
		waitStatus(t, expiring, http.StatusUnauthorized, 60*time.Second, "expired key")
	})

	t.Run("identical repeat is free inside the cache window", func(t *testing.T) {
		body := `{"module":"expr.eval","input":{"a":20,"b":22},"config":{"expression":"a + b"},"waitForMs":10000}`
		first := c.submit(body).json(t)
		again := c.submit(body).json(t)
		if first["totalUsage"].(float64) <= 0 || again["totalUsage"] != float64(0) || fmt.Sprint(again["output"]) != fmt.Sprint(first["output"]) ||
			again["status"] != "COMPLETED" {
			t.Fatalf("first %v\nrepeat %v", first, again)
		}
		// After the 3 s window the same call bills again.
		deadline := time.Now().Add(20 * time.Second)
		for {
			m := c.submit(body).json(t)
			if m["totalUsage"].(float64) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the call is still free 20 s after a 3 s window: %v", m)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("Idempotency-Key returns the same execution", func(t *testing.T) {
		body := []byte(`{"module":"core.echo","input":{"idem":1},"config":{}}`)
		post := func(b []byte, n string) rawResponse {
			return c.send(http.MethodPost, "/v1/sdk/components?nonce=idem"+n, b, b, time.Now(), "Idempotency-Key", "order-42")
		}
		first, again := post(body, "1"), post(body, "2")
		mustStatus(t, first, http.StatusOK, "first")
		mustStatus(t, again, http.StatusOK, "repeat")
		if first.json(t)["id"] != again.json(t)["id"] {
			t.Fatalf("the same key and body gave two executions: %s / %s", first.body, again.body)
		}
		wantErrorBody(t, post([]byte(`{"module":"core.echo","input":{"idem":2},"config":{}}`), "3"), http.StatusConflict, "Idempotency-Key")
	})

	t.Run("a burst is rate limited", func(t *testing.T) {
		// Requests are sent in concurrent waves: one after another, on a busy machine, they
		// can come slower than the 20/s refill and never exhaust the burst of 40.
		burst := svc.caller(t, svc.newKey(t, svc.key.WorkspaceID))
		var limited rawResponse
		for wave := 0; wave < 10 && limited.status == 0; wave++ {
			for _, r := range submitWave(burst, 60, wave) {
				for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
					if r.header.Get(h) == "" {
						t.Fatalf("response without %s: %v", h, r.header)
					}
				}
				if r.status == http.StatusTooManyRequests {
					limited = r
				}
			}
		}
		wantErrorBody(t, limited, http.StatusTooManyRequests, "")
		if s, err := strconv.Atoi(limited.header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q", limited.header.Get("Retry-After"))
		}
	})

	t.Run("unknown routes have the error body", func(t *testing.T) {
		wantErrorBody(t, c.do(http.MethodGet, "/v1/sdk/nothing-here", nil), http.StatusNotFound, "")
		wantErrorBody(t, c.do(http.MethodDelete, "/v1/sdk/components", nil), http.StatusMethodNotAllowed, "")
	})

	t.Run("modules are listed", func(t *testing.T) {
		r := c.do(http.MethodGet, "/v1/sdk/modules?limit=100", nil)
		mustStatus(t, r, http.StatusOK, "modules")
		var page struct {
			Data  []map[string]any `json:"data"`
			Total int              `json:"total"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil || page.Total < 7 || len(page.Data) != page.Total {
			t.Fatalf("modules: %s", r.body)
		}
	})

	svc.srv.stop(t, 30*time.Second)
	res := svc.cli.run("billing", "audit", svc.key.WorkspaceID)
	if res.code != 0 || !strings.Contains(res.stdout, "audit: clean") {
		t.Fatalf("billing audit after the run: %s", res)
	}
}

// submitWave sends n submits at once and returns their responses.
func submitWave(c *rawCaller, n, wave int) []rawResponse {
	out := make([]rawResponse, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out[i] = c.submit(fmt.Sprintf(`{"module":"core.echo","input":{"wave":%d,"burst":%d},"config":{}}`, wave, i))
		})
	}
	wg.Wait()
	return out
}

// waitStatus repeats a signed request until it answers want or the deadline passes: revocation
// and expiry take effect within the key cache's lifetime, not at once.
func waitStatus(t *testing.T, c *rawCaller, want int, within time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		r := c.do(http.MethodGet, "/v1/sdk/modules", nil)
		if r.status == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: still %d after %s: %s", what, r.status, within, r.body)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
