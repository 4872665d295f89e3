package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
	"github.com/switchyard/switchyard/internal/replay"
	"github.com/switchyard/switchyard/internal/testdb"
)

// The Postgres guard is a drop-in ReplayGuard.
var _ httpapi.ReplayGuard = (*replay.Postgres)(nil)

// sdkClock is a settable clock shared by the middleware and the signing test client.
type sdkClock struct{ ns atomic.Int64 }

func newSDKClock() *sdkClock {
	c := &sdkClock{}
	c.ns.Store(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *sdkClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *sdkClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// sdkKeyring is a KeyLookup over keys the test changes at will; it counts lookups.
type sdkKeyring struct {
	mu      sync.Mutex
	keys    map[string]httpapi.SDKKey
	lookups atomic.Int64
	fail    error
}

func (k *sdkKeyring) lookup(_ context.Context, id string) (httpapi.SDKKey, error) {
	k.lookups.Add(1)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail != nil {
		return httpapi.SDKKey{}, k.fail
	}
	key, ok := k.keys[id]
	if !ok {
		return httpapi.SDKKey{}, fmt.Errorf("key %s: %w", id, domain.ErrNotFound)
	}
	return key, nil
}

func (k *sdkKeyring) update(id string, f func(*httpapi.SDKKey)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := k.keys[id]
	f(&key)
	k.keys[id] = key
}

// sdkCredential is what a caller holds: the apiKey and the private key of its apiSecret.
type sdkCredential struct {
	id     string
	apiKey string
	priv   ed25519.PrivateKey
}

func (k *sdkKeyring) mint(t *testing.T, workspaceID string, allowed ...string) sdkCredential {
	t.Helper()
	id := uuid.New()
	m, err := apikeys.Mint(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := apikeys.ParseSecret(m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := apikeys.ParsePublicKey(m.PublicKey)
	if allowed == nil {
		allowed = []string{}
	}
	k.mu.Lock()
	k.keys[m.ID] = httpapi.SDKKey{ID: m.ID, WorkspaceID: workspaceID, KeyHash: m.KeyHash, PublicKey: pub, AllowedWorkflowIDs: allowed}
	k.mu.Unlock()
	return sdkCredential{id: m.ID, apiKey: m.APIKey, priv: priv}
}

// seenRequest is what the protected handler observed.
type seenRequest struct {
	caller    httpapi.Caller
	hasCaller bool
	body      string
}

type sdkFixture struct {
	t      *testing.T
	clock  *sdkClock
	keys   *sdkKeyring
	srv    *httptest.Server
	calls  chan seenRequest
	client *http.Client
}

// newSDKFixture serves /v1/sdk/echo (cost 1) and /v1/sdk/components (cost 2) behind the
// middleware. A nil clock is a new one; without opts.Lookup, keys come from the fixture's keyring.
func newSDKFixture(t *testing.T, clock *sdkClock, opts httpapi.SDKAuthConfig) *sdkFixture {
	t.Helper()
	if clock == nil {
		clock = newSDKClock()
	}
	f := &sdkFixture{t: t, clock: clock, keys: &sdkKeyring{keys: map[string]httpapi.SDKKey{}}, calls: make(chan seenRequest, 100)}
	opts.Now = f.clock.Now
	if opts.Lookup == nil {
		opts.Lookup = f.keys.lookup
	}
	auth := httpapi.NewSDKAuth(opts)
	s := httpapi.NewServer(httpapi.ServerConfig{MaxBodyBytes: 4096})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("handler read: %v", err)
		}
		c, ok := httpapi.CallerFrom(r.Context())
		f.calls <- seenRequest{caller: c, hasCaller: ok, body: string(b)}
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
	})
	s.V1.Handle("/sdk/echo", auth.Route(1, h)).Methods(http.MethodGet, http.MethodPost)
	s.V1.Handle("/sdk/components", auth.Route(2, h)).Methods(http.MethodPost)
	f.srv = httptest.NewServer(s.Handler())
	t.Cleanup(f.srv.Close)
	f.client = f.srv.Client()
	return f
}

// signed builds a request signed at the fixture's current time; tweak may change anything after
// signing.
func (f *sdkFixture) signed(cred sdkCredential, method, target, body string, tweak func(r *http.Request)) *http.Request {
	f.t.Helper()
	ts := strconv.FormatInt(f.clock.Now().Unix(), 10)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, f.srv.URL+target, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	r.Header.Set(httpapi.HeaderAPIKey, cred.apiKey)
	r.Header.Set(httpapi.HeaderSDKTimestamp, ts)
	r.Header.Set(httpapi.HeaderSDKSignature, apikeys.Sign(cred.priv, method, target, ts, []byte(body)))
	if tweak != nil {
		tweak(r)
	}
	return r
}

type sdkResponse struct {
	status int
	header http.Header
	body   string
}

func (f *sdkFixture) do(r *http.Request) sdkResponse {
	f.t.Helper()
	resp, err := f.client.Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return sdkResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// handled returns what the handler saw for the last accepted request.
func (f *sdkFixture) handled() seenRequest {
	f.t.Helper()
	select {
	case s := <-f.calls:
		return s
	default:
		f.t.Fatal("the handler was not called")
		return seenRequest{}
	}
}

func (f *sdkFixture) notHandled() {
	f.t.Helper()
	select {
	case s := <-f.calls:
		f.t.Fatalf("the handler was called: %+v", s)
	default:
	}
}

func wantError(t *testing.T, res sdkResponse, status int, message string) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status %d (%s), want %d", res.status, res.body, status)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(res.body), &body); err != nil {
		t.Fatalf("body %q: %v", res.body, err)
	}
	want := map[string]any{"message": message, "statusCode": float64(status), "error": http.StatusText(status)}
	if fmt.Sprint(body) != fmt.Sprint(want) {
		t.Fatalf("body %s, want %v", res.body, want)
	}
}

func TestSDKAuthAcceptsSignedRequests(t *testing.T) {
	f := newSDKFixture(t, nil, httpapi.SDKAuthConfig{})
	cred := f.keys.mint(t, "ws-1", "wf-1", "wf-2")
	body := `{"module":"core.echo","input":{"text":"héllo | world"},"config":{}}`
	res := f.do(f.signed(cred, http.MethodPost, "/v1/sdk/echo?trace=1&x=%2F", body, nil))
	if res.status != http.StatusOK {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	seen := f.handled()
	if !seen.hasCaller || seen.caller.KeyID != cred.id || seen.caller.WorkspaceID != "ws-1" ||
		fmt.Sprint(seen.caller.AllowedWorkflowIDs) != "[wf-1 wf-2]" {
		t.Fatalf("caller %+v (%v)", seen.caller, seen.hasCaller)
	}
	if !seen.caller.AllowsWorkflow("wf-2") || seen.caller.AllowsWorkflow("wf-3") {
		t.Fatal("AllowsWorkflow ignores the allowed list")
	}
	if seen.body != body {
		t.Fatalf("handler read %q, want the original body", seen.body)
	}
	for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		if res.header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}

	// No body: the message ends with "|"; an unrestricted key has an empty, non-nil list.
	open := f.keys.mint(t, "ws-2")
	res = f.do(f.signed(open, http.MethodGet, "/v1/sdk/echo", "", nil))
	if res.status != http.StatusOK {
		t.Fatalf("GET status %d: %s", res.status, res.body)
	}
	seen = f.handled()
	if seen.body != "" || seen.caller.AllowedWorkflowIDs == nil || len(seen.caller.AllowedWorkflowIDs) != 0 || !seen.caller.AllowsWorkflow("any") {
		t.Fatalf("GET seen %+v", seen)
	}

	// Timestamps exactly at the edge of the skew window pass.
	for _, d := range []time.Duration{-300 * time.Second, 300 * time.Second} {
		res = f.do(f.signed(cred, http.MethodGet, "/v1/sdk/echo?edge="+d.String(), "", func(r *http.Request) {
			ts := strconv.FormatInt(f.clock.Now().Add(d).Unix(), 10)
			r.Header.Set(httpapi.HeaderSDKTimestamp, ts)
			r.Header.Set(httpapi.HeaderSDKSignature, apikeys.Sign(cred.priv, http.MethodGet, "/v1/sdk/echo?edge="+d.String(), ts, nil))
		}))
		if res.status != http.StatusOK {
			t.Fatalf("timestamp %v from now: %d %s", d, res.status, res.body)
		}
		f.handled()
	}
}

func TestSDKAuthRejections(t *testing.T) {
	f := newSDKFixture(t, nil, httpapi.SDKAuthConfig{})
	cred := f.keys.mint(t, "ws-1")
	other := f.keys.mint(t, "ws-1")
	const target = "/v1/sdk/echo?q=1"
	const body = `{"a":1}`
	resign := func(method, path, ts, b string) func(r *http.Request) {
		return func(r *http.Request) {
			r.Header.Set(httpapi.HeaderSDKTimestamp, ts)
			r.Header.Set(httpapi.HeaderSDKSignature, apikeys.Sign(cred.priv, method, path, ts, []byte(b)))
		}
	}
	now := func() int64 { return f.clock.Now().Unix() }
	cases := []struct {
		name    string
		body    string
		tweak   func(r *http.Request)
		message string
	}{
		{"tampered body", body, func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(`{"a":2}`))
		}, httpapi.MsgInvalidSignature},
		{"tampered query", body, func(r *http.Request) { r.URL.RawQuery = "q=2" }, httpapi.MsgInvalidSignature},
		{"tampered method", "", func(r *http.Request) { r.Method = http.MethodPost }, httpapi.MsgInvalidSignature},
		{"signed by another key", body, func(r *http.Request) {
			ts := r.Header.Get(httpapi.HeaderSDKTimestamp)
			r.Header.Set(httpapi.HeaderSDKSignature, apikeys.Sign(other.priv, http.MethodPost, target, ts, []byte(body)))
		}, httpapi.MsgInvalidSignature},
		{"missing signature", body, func(r *http.Request) { r.Header.Del(httpapi.HeaderSDKSignature) }, httpapi.MsgInvalidSignature},
		{"undecodable signature", body, func(r *http.Request) { r.Header.Set(httpapi.HeaderSDKSignature, "%%%not base64") }, httpapi.MsgInvalidSignature},
		{"short signature", body, func(r *http.Request) { r.Header.Set(httpapi.HeaderSDKSignature, "AAAA") }, httpapi.MsgInvalidSignature},
		{"missing key", body, func(r *http.Request) { r.Header.Del(httpapi.HeaderAPIKey) }, httpapi.MsgInvalidAPIKey},
		{"malformed key", body, func(r *http.Request) { r.Header.Set(httpapi.HeaderAPIKey, "ws_nope") }, httpapi.MsgInvalidAPIKey},
		{"unknown key", body, func(r *http.Request) {
			r.Header.Set(httpapi.HeaderAPIKey, apikeys.Format(uuid.New(), make([]byte, 32)))
		}, httpapi.MsgInvalidAPIKey},
		{"right id, wrong secret part", body, func(r *http.Request) {
			r.Header.Set(httpapi.HeaderAPIKey, cred.apiKey[:len(cred.apiKey)-1]+flip(cred.apiKey[len(cred.apiKey)-1]))
		}, httpapi.MsgInvalidAPIKey},
		{"missing timestamp", body, func(r *http.Request) { r.Header.Del(httpapi.HeaderSDKTimestamp) }, httpapi.MsgExpiredTimestamp},
		{"unparsable timestamp", body, func(r *http.Request) { r.Header.Set(httpapi.HeaderSDKTimestamp, "yesterday") }, httpapi.MsgExpiredTimestamp},
		{"signed timestamp", body, func(r *http.Request) {
			r.Header.Set(httpapi.HeaderSDKTimestamp, "+"+r.Header.Get(httpapi.HeaderSDKTimestamp))
		}, httpapi.MsgExpiredTimestamp},
		{"millisecond timestamp", body, func(r *http.Request) {
			resign(http.MethodPost, target, strconv.FormatInt(f.clock.Now().UnixMilli(), 10), body)(r)
		}, httpapi.MsgExpiredTimestamp},
		{"stale timestamp", body, func(r *http.Request) { resign(http.MethodPost, target, strconv.FormatInt(now()-301, 10), body)(r) }, httpapi.MsgExpiredTimestamp},
		{"future timestamp", body, func(r *http.Request) { resign(http.MethodPost, target, strconv.FormatInt(now()+301, 10), body)(r) }, httpapi.MsgExpiredTimestamp},
		{"timestamp changed after signing", body, func(r *http.Request) { r.Header.Set(httpapi.HeaderSDKTimestamp, strconv.FormatInt(now()-1, 10)) }, httpapi.MsgInvalidSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := http.MethodPost
			if c.body == "" {
				method = http.MethodGet
			}
			r := f.signed(cred, method, target, c.body, c.tweak)
			res := f.do(r)
			wantError(t, res, http.StatusUnauthorized, c.message)
			if res.header.Get("RateLimit-Remaining") != "" {
				t.Fatal("an unauthenticated request got rate-limit headers")
			}
			f.notHandled()
		})
	}

	t.Run("replayed signature", func(t *testing.T) {
		r1 := f.signed(cred, http.MethodPost, target, body, nil)
		r2 := f.signed(cred, http.MethodPost, target, body, nil)
		if res := f.do(r1); res.status != http.StatusOK {
			t.Fatalf("first: %d %s", res.status, res.body)
		}
		f.handled()
		f.clock.Advance(200 * time.Second) // still inside the window
		wantError(t, f.do(r2), http.StatusUnauthorized, httpapi.MsgInvalidSignature)
		f.notHandled()
		// The same request signed again at a later second is a new request.
		if res := f.do(f.signed(cred, http.MethodPost, target, body, nil)); res.status != http.StatusOK {
			t.Fatalf("re-signed: %d %s", res.status, res.body)
		}
		f.handled()
	})

	t.Run("repeated GET is not a replay", func(t *testing.T) {
		// Polling sends the same signed GET several times a second; it changes nothing.
		for range 3 {
			if res := f.do(f.signed(cred, http.MethodGet, target, "", nil)); res.status != http.StatusOK {
				t.Fatalf("repeated GET: %d %s", res.status, res.body)
			}
			f.handled()
		}
	})
}

func flip(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

func TestSDKAuthRevokedAndExpiredKeys(t *testing.T) {
	f := newSDKFixture(t, nil, httpapi.SDKAuthConfig{})
	cred := f.keys.mint(t, "ws-1")
	get := func(n int) sdkResponse {
		return f.do(f.signed(cred, http.MethodGet, fmt.Sprint("/v1/sdk/echo?n=", n), "", nil))
	}
	if res := get(1); res.status != http.StatusOK {
		t.Fatalf("fresh key: %d %s", res.status, res.body)
	}
	f.handled()
	f.keys.update(cred.id, func(k *httpapi.SDKKey) { k.Revoked = true })
	lookups := f.keys.lookups.Load()
	// Within the cache TTL the cached key is used: that is the documented revocation latency.
	f.clock.Advance(4 * time.Second)
	if res := get(2); res.status != http.StatusOK {
		t.Fatalf("within the TTL: %d %s", res.status, res.body)
	}
	f.handled()
	if f.keys.lookups.Load() != lookups {
		t.Fatal("the cached key was looked up again within the TTL")
	}
	f.clock.Advance(time.Second) // 5 s after the lookup: revocation is in force
	wantError(t, get(3), http.StatusUnauthorized, httpapi.MsgInvalidAPIKey)
	f.notHandled()

	exp := f.keys.mint(t, "ws-1")
	at := f.clock.Now().Add(2 * time.Second)
	f.keys.update(exp.id, func(k *httpapi.SDKKey) { k.ExpiresAt = &at })
	if res := f.do(f.signed(exp, http.MethodGet, "/v1/sdk/echo?e=1", "", nil)); res.status != http.StatusOK {
		t.Fatalf("before expiry: %d %s", res.status, res.body)
	}
	f.handled()
	f.clock.Advance(2 * time.Second) // expiry is checked on every request, cached or not
	wantError(t, f.do(f.signed(exp, http.MethodGet, "/v1/sdk/echo?e=2", "", nil)), http.StatusUnauthorized, httpapi.MsgInvalidAPIKey)
	f.notHandled()

	// Unknown ids are cached too, so a flood of made-up keys costs one lookup each per TTL.
	unknown := sdkCredential{apiKey: apikeys.Format(uuid.New(), make([]byte, 32)), priv: cred.priv}
	before := f.keys.lookups.Load()
	for i := 0; i < 3; i++ {
		wantError(t, f.do(f.signed(unknown, http.MethodGet, "/v1/sdk/echo", "", nil)), http.StatusUnauthorized, httpapi.MsgInvalidAPIKey)
	}
	if n := f.keys.lookups.Load() - before; n != 1 {
		t.Fatalf("%d lookups of one unknown key within the TTL, want 1", n)
	}
}

func TestSDKAuthRateLimit(t *testing.T) {
	f := newSDKFixture(t, nil, httpapi.SDKAuthConfig{RatePerSecond: 1, Burst: 4})
	cred := f.keys.mint(t, "ws-1")
	n := 0
	get := func() sdkResponse {
		n++
		return f.do(f.signed(cred, http.MethodGet, fmt.Sprint("/v1/sdk/echo?n=", n), "", nil))
	}
	post := func() sdkResponse {
		n++
		return f.do(f.signed(cred, http.MethodPost, "/v1/sdk/components", fmt.Sprintf(`{"n":%d}`, n), nil))
	}
	headers := func(res sdkResponse, limit, remaining, reset string) {
		t.Helper()
		got := [3]string{res.header.Get("RateLimit-Limit"), res.header.Get("RateLimit-Remaining"), res.header.Get("RateLimit-Reset")}
		if got != [3]string{limit, remaining, reset} {
			t.Fatalf("RateLimit headers %v, want [%s %s %s]", got, limit, remaining, reset)
		}
	}
	for i, rem := range []string{"3", "2", "1", "0"} {
		res := get()
		if res.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, res.status, res.body)
		}
		f.handled()
		headers(res, "4", rem, strconv.Itoa(4-3+i))
	}
	res := get()
	wantError(t, res, http.StatusTooManyRequests, "rate limit exceeded")
	f.notHandled()
	if res.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q, want 1", res.header.Get("Retry-After"))
	}
	headers(res, "4", "0", "4")

	f.clock.Advance(time.Second)
	if res := get(); res.status != http.StatusOK {
		t.Fatalf("after a second: %d %s", res.status, res.body)
	}
	f.handled()

	// Submit costs two tokens: a full bucket of 4 takes two, then Retry-After covers 2 tokens.
	f.clock.Advance(10 * time.Second)
	for i := 0; i < 2; i++ {
		if res := post(); res.status != http.StatusOK {
			t.Fatalf("submit %d: %d %s", i, res.status, res.body)
		}
		f.handled()
	}
	res = post()
	wantError(t, res, http.StatusTooManyRequests, "rate limit exceeded")
	if res.header.Get("Retry-After") != "2" {
		t.Fatalf("submit Retry-After %q, want 2", res.header.Get("Retry-After"))
	}
	headers(res, "4", "0", "4")
	f.clock.Advance(time.Second)
	res = post() // one token is not enough for a submit
	if res.status != http.StatusTooManyRequests || res.header.Get("Retry-After") != "1" {
		t.Fatalf("submit with one token: %d Retry-After %q", res.status, res.header.Get("Retry-After"))
	}
	if res := get(); res.status != http.StatusOK { // but it is for a GET
		t.Fatalf("GET with one token: %d %s", res.status, res.body)
	}
	f.handled()

	// Buckets are per key.
	other := f.keys.mint(t, "ws-1")
	if res := f.do(f.signed(other, http.MethodGet, "/v1/sdk/echo", "", nil)); res.status != http.StatusOK || res.header.Get("RateLimit-Remaining") != "3" {
		t.Fatalf("another key: %d remaining %q", res.status, res.header.Get("RateLimit-Remaining"))
	}
	f.handled()
}

func TestSDKAuthBodyLimitAndLookupFailure(t *testing.T) {
	f := newSDKFixture(t, nil, httpapi.SDKAuthConfig{})
	cred := f.keys.mint(t, "ws-1")
	big := strings.Repeat("x", 5000)
	// Chunked, so the size is only found while reading.
	r := f.signed(cred, http.MethodPost, "/v1/sdk/echo", big, func(r *http.Request) {
		r.Body = io.NopCloser(strings.NewReader(big))
		r.ContentLength = -1
	})
	wantError(t, f.do(r), http.StatusRequestEntityTooLarge, "request body exceeds the limit")
	f.notHandled()

	f.keys.mu.Lock()
	f.keys.fail = errors.New("event store down")
	f.keys.mu.Unlock()
	other := f.keys.mint(t, "ws-1")
	wantError(t, f.do(f.signed(other, http.MethodGet, "/v1/sdk/echo", "", nil)), http.StatusInternalServerError, "internal error")
	f.notHandled()
}

func TestMemoryReplayGuard(t *testing.T) {
	g := httpapi.NewMemoryReplayGuard()
	ctx := context.Background()
	until := time.Now().Add(time.Minute)
	if seen, _ := g.Seen(ctx, []byte("a"), until); seen {
		t.Fatal("new signature seen")
	}
	if seen, _ := g.Seen(ctx, []byte("a"), until); !seen {
		t.Fatal("repeat not seen")
	}
	if seen, _ := g.Seen(ctx, []byte("old"), time.Now().Add(-time.Second)); seen {
		t.Fatal("new signature seen")
	}
	if seen, _ := g.Seen(ctx, []byte("old"), until); seen {
		t.Fatal("a signature whose window had passed still counts")
	}
}

// TestSDKAuthWithEventStoreKeys wires the middleware as serve does: keys minted by commands and
// looked up by folding their stream, with no projection running.
func TestSDKAuthWithEventStoreKeys(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := replay.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.New(ctx, pool, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := newSDKClock()
	cmds := commands.New(store, commands.WithClock(clock.Now))
	email := "sdk-" + uuid.NewString()[:8] + "@example.com"
	if _, err := cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: "password-123"}); err != nil {
		t.Fatal(err)
	}
	ws, err := cmds.Workspaces.CreateWorkspace(ctx, "SDK", email)
	if err != nil {
		t.Fatal(err)
	}
	var def workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "Scoped", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`), &def); err != nil {
		t.Fatal(err)
	}
	wf, err := cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: def})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cmds.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws, AllowedWorkflowIDs: []string{wf.ID}})
	if err != nil {
		t.Fatal(err)
	}
	priv, err := apikeys.ParseSecret(m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	// Two servers stand for two serve processes on one database.
	opts := httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(cmds.Workspaces.APIKey)}
	opts.Replay = replay.New(pool, replay.Config{Now: clock.Now})
	a := newSDKFixture(t, clock, opts)
	opts.Replay = replay.New(pool, replay.Config{Now: clock.Now})
	b := newSDKFixture(t, clock, opts)
	cred := sdkCredential{id: m.ID, apiKey: m.APIKey, priv: priv}
	req := a.signed(cred, http.MethodPost, "/v1/sdk/echo", `{"x":1}`, nil)
	if res := a.do(req); res.status != http.StatusOK {
		t.Fatalf("a key used right after creation: %d %s", res.status, res.body)
	}
	if seen := a.handled(); seen.caller.WorkspaceID != ws || seen.caller.KeyID != m.ID || fmt.Sprint(seen.caller.AllowedWorkflowIDs) != "["+wf.ID+"]" {
		t.Fatalf("caller %+v", seen.caller)
	}
	replayed := b.signed(cred, http.MethodPost, "/v1/sdk/echo", `{"x":1}`, nil)
	wantError(t, b.do(replayed), http.StatusUnauthorized, httpapi.MsgInvalidSignature)
	b.notHandled()

	if err := cmds.Workspaces.RevokeAPIKey(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(httpapi.MaxSDKCacheTTL)
	wantError(t, a.do(a.signed(cred, http.MethodGet, "/v1/sdk/echo", "", nil)), http.StatusUnauthorized, httpapi.MsgInvalidAPIKey)
	wantError(t, b.do(b.signed(cred, http.MethodGet, "/v1/sdk/echo?b", "", nil)), http.StatusUnauthorized, httpapi.MsgInvalidAPIKey)
}
