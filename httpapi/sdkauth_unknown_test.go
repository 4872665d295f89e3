package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
)

// unknownCredential is a well-formed API key (and a signature key) that no store holds.
func unknownCredential(t *testing.T) sdkCredential {
	t.Helper()
	m, err := apikeys.Mint(uuid.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := apikeys.ParseSecret(m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	return sdkCredential{id: m.ID, apiKey: m.APIKey, priv: priv}
}

// Random well-formed keys cost one store read each only up to a small burst per client
// address; past it they are refused 429 without a read. A repeated unknown key is read once
// (the negative cache), and a key this process has seen lately still passes while its
// address is throttled.
func TestUnknownKeysAreThrottledPerAddress(t *testing.T) {
	f := newSDKFixture(t, nil, httpapi.SDKAuthConfig{UnknownKeyRate: 1, UnknownKeyBurst: 10})
	good := f.keys.mint(t, "ws-1")
	if res := f.do(f.signed(good, http.MethodGet, "/v1/sdk/echo", "", nil)); res.status != http.StatusOK {
		t.Fatalf("good key: %d %s", res.status, res.body)
	}
	f.handled()
	f.clock.Advance(6 * time.Second) // past the lookup cache: the next use of good reads again

	same := unknownCredential(t)
	before := f.keys.lookups.Load()
	for range 20 {
		wantError(t, f.do(f.signed(same, http.MethodGet, "/v1/sdk/echo", "", nil)), http.StatusUnauthorized, httpapi.MsgInvalidAPIKey)
	}
	if n := f.keys.lookups.Load() - before; n != 1 {
		t.Fatalf("one unknown key repeated 20 times cost %d store reads, want 1", n)
	}

	before = f.keys.lookups.Load()
	throttled := 0
	for range 200 {
		res := f.do(f.signed(unknownCredential(t), http.MethodGet, "/v1/sdk/echo", "", nil))
		switch res.status {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			if res.header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			wantError(t, res, http.StatusTooManyRequests, "too many unknown API keys from this address")
			throttled++
		default:
			t.Fatalf("random key: %d %s", res.status, res.body)
		}
	}
	if n := f.keys.lookups.Load() - before; n > 10 {
		t.Fatalf("200 random keys from one address cost %d store reads, want at most the burst of 9 left", n)
	}
	if throttled < 190 {
		t.Fatalf("only %d of 200 random keys were throttled", throttled)
	}
	f.notHandled()

	before = f.keys.lookups.Load()
	if res := f.do(f.signed(good, http.MethodGet, "/v1/sdk/echo", "", nil)); res.status != http.StatusOK {
		t.Fatalf("a known key while its address is throttled: %d %s", res.status, res.body)
	}
	f.handled()
	if f.keys.lookups.Load() != before+1 {
		t.Fatal("the known key was not read again: revocation would go unseen")
	}
	// The bucket refills with time.
	f.clock.Advance(2 * time.Second)
	wantError(t, f.do(f.signed(unknownCredential(t), http.MethodGet, "/v1/sdk/echo", "", nil)), http.StatusUnauthorized, httpapi.MsgInvalidAPIKey)
}

// A request the service could not serve (503: its database is away) gives its rate-limit
// tokens back, so clients retrying through an outage are not then refused 429.
func TestUnavailableAnswersCostNoRateTokens(t *testing.T) {
	keys := &sdkKeyring{keys: map[string]httpapi.SDKKey{}}
	clock := newSDKClock()
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: keys.lookup, Now: clock.Now, RatePerSecond: 1, Burst: 2})
	s := httpapi.NewServer(httpapi.ServerConfig{})
	s.V1.Handle("/sdk/echo", auth.Route(1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteUnavailable(w)
	}))).Methods(http.MethodGet)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	f := &sdkFixture{t: t, clock: clock, keys: keys, srv: srv, client: srv.Client()}
	cred := keys.mint(t, "ws-1")
	for i := range 5 {
		if res := f.do(f.signed(cred, http.MethodGet, "/v1/sdk/echo", "", nil)); res.status != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %d %s, want 503 every time", i, res.status, res.body)
		}
	}
}

// Real keys cost their address nothing, even when more of them than the burst are first seen
// at once (a fleet of workers behind one NAT starting together): the throttle charges only
// keys the store does not know.
func TestManyRealKeysFromOneAddressAtOnceAreNotThrottled(t *testing.T) {
	f := newSDKFixture(t, nil, httpapi.SDKAuthConfig{UnknownKeyRate: 1, UnknownKeyBurst: 3})
	const n = 10
	creds := make([]sdkCredential, n)
	for i := range creds {
		creds[i] = f.keys.mint(t, "ws-1")
	}
	// Hold every lookup until all n requests are inside one, so their first uses overlap.
	f.keys.mu.Lock()
	results := make(chan int, n)
	for _, c := range creds {
		go func() { results <- f.do(f.signed(c, http.MethodGet, "/v1/sdk/echo", "", nil)).status }()
	}
	deadline := time.Now().Add(30 * time.Second)
	for f.keys.lookups.Load() < n && time.Now().Before(deadline) {
		select {
		case status := <-results:
			f.keys.mu.Unlock()
			t.Fatalf("a request answered %d before every lookup had started", status)
		case <-time.After(10 * time.Millisecond):
		}
	}
	got := f.keys.lookups.Load()
	f.keys.mu.Unlock()
	if got < n {
		t.Fatalf("only %d of %d first uses of real keys reached the store", got, n)
	}
	for range n {
		if status := <-results; status != http.StatusOK {
			t.Fatalf("a real key's first use answered %d", status)
		}
	}
}
