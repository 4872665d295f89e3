package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
)

// server runs the service's real SDK authentication in front of handler, for one minted key.
func server(t *testing.T, handler http.HandlerFunc) (*httptest.Server, apikeys.Minted) {
	t.Helper()
	m, err := apikeys.Mint(uuid.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := apikeys.ParsePublicKey(m.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: func(ctx context.Context, id string) (httpapi.SDKKey, error) {
		return httpapi.SDKKey{ID: m.ID, WorkspaceID: "ws", KeyHash: m.KeyHash, PublicKey: pub}, nil
	}})
	srv := httptest.NewServer(auth.Route(1, handler))
	t.Cleanup(srv.Close)
	return srv, m
}

func TestSignedRequestsPassTheServiceAuthentication(t *testing.T) {
	var bodies []string
	srv, m := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"e1","module":"core.echo","status":"CREATED","completed":false,"output":null,"error":null,"totalUsage":0,"callback":{"headerNames":[]}}`)
	})
	c, err := client.New(srv.URL, m.APIKey, m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Two identical submits in one second: each must be a new signature, not a replay.
	for range 2 {
		e, err := c.Submit(ctx, client.SubmitRequest{Module: "core.echo", Input: map[string]int{"a": 1}})
		if err != nil || e.ID != "e1" || e.Status != client.StatusCreated {
			t.Fatalf("submit: %+v, %v", e, err)
		}
	}
	if _, err := c.GetExecution(ctx, "e1"); err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(bodies) != 3 || bodies[0] != `{"module":"core.echo","input":{"a":1},"config":{}}` {
		t.Fatalf("bodies the server received: %q", bodies)
	}
}

// A client shared by many goroutines reuses its connections: at http.DefaultTransport's two idle
// connections per host, every answer beyond two closed its connection and the next call
// dialled again.
func TestAClientSharedByManyCallersKeepsItsConnections(t *testing.T) {
	var dialled atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"e1","module":"core.echo","status":"COMPLETED","completed":true,"output":{},"error":null,"totalUsage":1}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	m, err := apikeys.Mint(uuid.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(srv.URL, m.APIKey, m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	const callers, calls = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for range callers {
		wg.Go(func() {
			for range calls {
				if _, err := c.GetExecution(context.Background(), "e1"); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A caller finding no idle connection dials; racing callers may dial one more each.
	if n := dialled.Load(); n > 2*callers {
		t.Fatalf("%d calls by %d callers opened %d connections, want at most %d", callers*calls, callers, n, 2*callers)
	}
}

func TestRetriesHonourRetryAfterAndTypedErrors(t *testing.T) {
	var calls atomic.Int32
	srv, m := server(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			httpapi.WriteError(w, http.StatusTooManyRequests, "rate limit exceeded")
			return
		}
		httpapi.WriteError(w, http.StatusPaymentRequired, "insufficient credits")
	})
	c, err := client.New(srv.URL, m.APIKey, m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(context.Background(), client.SubmitRequest{Module: "core.echo"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusPaymentRequired || apiErr.Name != "Payment Required" ||
		!strings.Contains(apiErr.Message, "insufficient") || !client.IsStatus(err, 402) {
		t.Fatalf("err = %#v, want the typed 402 after one retried 429", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d calls, want the 429 retried once", calls.Load())
	}
}

func TestNewRejectsBadCredentials(t *testing.T) {
	if _, err := client.New("http://x", "ws_x", "not base64!"); err == nil {
		t.Fatal("a bad secret must be refused")
	}
	m, _ := apikeys.Mint(uuid.New(), nil)
	if _, err := client.New("http://x", "key", m.APISecret); err == nil {
		t.Fatal("a key without ws_ must be refused")
	}
}

// A 503 (the database is restarting) is retried after the server's Retry-After, not the
// client's backoff: with an hour of backoff, the retry can only be the Retry-After of 0.
func TestRetries503AfterRetryAfter(t *testing.T) {
	var calls atomic.Int32
	srv, m := server(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			httpapi.WriteError(w, http.StatusServiceUnavailable, "service temporarily unavailable; retry later")
			return
		}
		io.WriteString(w, `{"id":"e1","status":"CREATED"}`)
	})
	c, err := client.New(srv.URL, m.APIKey, m.APISecret, client.WithBackoff(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e, err := c.GetExecution(ctx, "e1"); err != nil || e.ID != "e1" {
		t.Fatalf("get: %+v, %v (after %d calls)", e, err, calls.Load())
	}
	if calls.Load() != 2 {
		t.Fatalf("%d calls, want the 503 retried once", calls.Load())
	}
}

// A retried submit carries the caller's Idempotency-Key on every attempt, so a submit whose
// answer was lost to an outage cannot run the component twice; without one, none is sent.
func TestSubmitRetriesKeepTheirIdempotencyKey(t *testing.T) {
	var keys []string
	srv, m := server(t, func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) == 1 {
			w.Header().Set("Retry-After", "0")
			httpapi.WriteError(w, http.StatusServiceUnavailable, "service temporarily unavailable; retry later")
			return
		}
		io.WriteString(w, `{"id":"e1","status":"CREATED"}`)
	})
	c, err := client.New(srv.URL, m.APIKey, m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"order-7", ""} {
		if _, err := c.Submit(context.Background(), client.SubmitRequest{Module: "core.echo", IdempotencyKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) != 3 || keys[0] != "order-7" || keys[1] != "order-7" || keys[2] != "" {
		t.Fatalf("Idempotency-Key of the attempts: %q; want order-7 twice, then none", keys)
	}
}
