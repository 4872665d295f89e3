package modules

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type testServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	ts := &testServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		io.WriteString(w, `{"ok": true, "n": 1}`)
	})
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok": tru`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello")
	})
	mux.HandleFunc("/bin", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0xff, 0xfe, 0x00, 0x01})
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"method":      r.Method,
			"contentType": r.Header.Get("Content-Type"),
			"token":       r.Header.Get("X-Token"),
			"userAgent":   r.Header.Get("User-Agent"),
			"body":        string(body),
			"query":       r.URL.Query(),
		})
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/redirect?n=%d", n-1), http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"done": true}`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
			io.WriteString(w, strings.Repeat("a", n))
			return
		}
		for i := 0; i < n; i += 100 {
			io.WriteString(w, strings.Repeat("a", min(100, n-i)))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/status/503", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "unavailable")
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // until the client gives up
	})
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestHTTPRequest(t *testing.T) {
	ts := newTestServer(t)
	r := Builtins(BuiltinsConfig{AllowPrivateNetworks: true})
	u := func(path string) string { return ts.URL + path }
	cfg := func(s string, args ...any) string { return fmt.Sprintf(s, args...) }

	tests := []struct {
		name, config, input string
		check               func(t *testing.T, out map[string]any)
		wantCode            string
	}{
		{name: "GET JSON", config: cfg(`{"url": %q}`, u("/json")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["status"], 200.0)
			expect(t, out["body"], map[string]any{"ok": true, "n": 1.0})
			expect(t, out["url"], u("/json"))
			h := out["headers"].(map[string]any)
			expect(t, h["Content-Type"], "application/json; charset=utf-8")
			expect(t, h["X-Multi"], "a, b")
		}},
		{name: "text body", config: cfg(`{"url": %q}`, u("/text")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["body"], "hello")
		}},
		{name: "invalid JSON stays a string", config: cfg(`{"url": %q}`, u("/badjson")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["body"], `{"ok": tru`)
		}},
		{name: "binary body is base64", config: cfg(`{"url": %q}`, u("/bin")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["body"], "//4AAQ==")
			expect(t, out["bodyEncoding"], "base64")
		}},
		{name: "HEAD", config: cfg(`{"method": "HEAD", "url": %q}`, u("/json")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["status"], 200.0)
			expect(t, out["body"], "")
		}},
		{name: "POST JSON body, headers, query", config: cfg(`{"method": "POST", "url": %q, "headers": {"X-Token": "secret"}, "query": {"q": "a b"}, "body": {"a": 1}}`, u("/echo?x=1")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["body"], map[string]any{
				"method": "POST", "contentType": "application/json", "token": "secret",
				"userAgent": "Switchyard-HTTP-Module/1", "body": `{"a": 1}`,
				"query": map[string]any{"x": []any{"1"}, "q": []any{"a b"}},
			})
		}},
		{name: "string body is text", config: cfg(`{"method": "PUT", "url": %q, "body": "plain text"}`, u("/echo")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			body := out["body"].(map[string]any)
			expect(t, body["contentType"], "text/plain; charset=utf-8")
			expect(t, body["body"], "plain text")
		}},
		{name: "url, headers and body from input", config: `{"method": "POST", "headers": {"X-Token": "config", "User-Agent": "ua/2"}, "body": "config"}`,
			input: cfg(`{"url": %q, "headers": {"X-Token": "input"}, "body": "input"}`, u("/echo")), check: func(t *testing.T, out map[string]any) {
				body := out["body"].(map[string]any)
				expect(t, body["token"], "input")
				expect(t, body["userAgent"], "ua/2")
				expect(t, body["body"], "input")
			}},
		{name: "config url wins over input url", config: cfg(`{"url": %q}`, u("/text")), input: cfg(`{"url": %q}`, u("/json")), check: func(t *testing.T, out map[string]any) {
			expect(t, out["body"], "hello")
		}},
		{name: "5 redirects are followed", config: cfg(`{"url": %q}`, u("/redirect?n=5")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["status"], 200.0)
			expect(t, out["body"], map[string]any{"done": true})
			expect(t, out["url"], u("/redirect?n=0"))
		}},
		{name: "6 redirects are too many", config: cfg(`{"url": %q}`, u("/redirect?n=6")), input: `{}`, wantCode: CodeTooManyRedirects},
		{name: "redirects not followed", config: cfg(`{"url": %q, "followRedirects": false}`, u("/redirect?n=1")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["status"], 302.0)
			expect(t, out["headers"].(map[string]any)["Location"], "/redirect?n=0")
		}},
		{name: "error status is an output", config: cfg(`{"url": %q}`, u("/status/503")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, out["status"], 503.0)
			expect(t, out["body"], "unavailable")
		}},
		{name: "failOnHttpError", config: cfg(`{"url": %q, "failOnHttpError": true}`, u("/status/503")), input: `{}`, wantCode: CodeHTTPStatus},
		{name: "body at the cap", config: cfg(`{"url": %q, "maxResponseBytes": 1000}`, u("/big?n=1000")), input: `{}`, check: func(t *testing.T, out map[string]any) {
			expect(t, len(out["body"].(string)), 1000)
		}},
		{name: "body over the cap (Content-Length)", config: cfg(`{"url": %q, "maxResponseBytes": 1000}`, u("/big?n=1001")), input: `{}`, wantCode: CodeResponseTooLarge},
		{name: "body over the cap (chunked)", config: cfg(`{"url": %q, "maxResponseBytes": 1000}`, u("/big?n=5000&chunked=1")), input: `{}`, wantCode: CodeResponseTooLarge},
		{name: "body over the default cap", config: cfg(`{"url": %q}`, u("/big?n=1048577")), input: `{}`, wantCode: CodeResponseTooLarge},
		{name: "request timeout", config: cfg(`{"url": %q, "timeoutMs": 50}`, u("/hang")), input: `{}`, wantCode: CodeTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, f := runBuiltin(t, r, "http.request", tt.config, tt.input, 1)
			if tt.wantCode != "" {
				if f == nil || f.Code != tt.wantCode {
					t.Fatalf("got %v / %+v, want failure %s", got, f, tt.wantCode)
				}
				return
			}
			if f != nil {
				t.Fatalf("failure %s: %s", f.Code, f.Message)
			}
			tt.check(t, got.(map[string]any))
		})
	}
}

func expect(t *testing.T, got, want any) {
	t.Helper()
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("got %s, want %s", gb, wb)
	}
}

func TestHTTPRequestFailureDetails(t *testing.T) {
	ts := newTestServer(t)
	r := Builtins(BuiltinsConfig{AllowPrivateNetworks: true})
	_, f := runBuiltin(t, r, "http.request", fmt.Sprintf(`{"url": %q, "failOnHttpError": true}`, ts.URL+"/status/503"), `{}`, 1)
	b, _ := json.Marshal(f)
	for _, want := range []string{`"code":"http_status"`, `"status":503`, `"body":"unavailable"`, "503 Service Unavailable"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("failure %s lacks %s", b, want)
		}
	}
}

func TestHTTPRequestOptionCap(t *testing.T) {
	ts := newTestServer(t)
	r := Builtins(BuiltinsConfig{AllowPrivateNetworks: true, MaxHTTPResponseBytes: 100, HTTPUserAgent: "test-agent"})
	if _, f := runBuiltin(t, r, "http.request", fmt.Sprintf(`{"url": %q}`, ts.URL+"/big?n=101"), `{}`, 1); f == nil || f.Code != CodeResponseTooLarge {
		t.Fatalf("failure = %+v, want %s", f, CodeResponseTooLarge)
	}
	err := r.Validate("http.request", json.RawMessage(fmt.Sprintf(`{"url": %q, "maxResponseBytes": 101}`, ts.URL)), json.RawMessage(`{}`))
	if ve, ok := err.(*ValidationError); !ok || ve.Field != "config.maxResponseBytes" {
		t.Fatalf("err = %v", err)
	}
	out, f := runBuiltin(t, r, "http.request", fmt.Sprintf(`{"url": %q}`, ts.URL+"/echo"), `{}`, 1)
	if f != nil {
		t.Fatal(f)
	}
	expect(t, out.(map[string]any)["body"].(map[string]any)["userAgent"], "test-agent")
}

func TestHTTPRequestNetworkError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close() // nothing listens there any more
	r := Builtins(BuiltinsConfig{AllowPrivateNetworks: true})
	// A hostname: the message may repeat the caller's URL, never the address it resolved to.
	_, f := runBuiltin(t, r, "http.request", fmt.Sprintf(`{"url": "http://localhost:%s/"}`, port), `{}`, 1)
	if f == nil || f.Code != CodeNetwork || !strings.Contains(f.Message, "refused") {
		t.Fatalf("failure = %+v, want %s", f, CodeNetwork)
	}
	for _, leak := range []string{"127.0.0.1", "::1", "dial tcp"} {
		if strings.Contains(f.Message, leak) {
			t.Fatalf("failure message %q shows %q", f.Message, leak)
		}
	}
}

func TestHTTPRequestRunDeadline(t *testing.T) {
	ts := newTestServer(t)
	r := Builtins(BuiltinsConfig{AllowPrivateNetworks: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := r.Run(ctx, "http.request", Call{Config: json.RawMessage(fmt.Sprintf(`{"url": %q}`, ts.URL+"/hang")), Input: json.RawMessage(`{}`)})
	if f, ok := AsFailure(err); !ok || f.Code != CodeTimeout {
		t.Fatalf("err = %v, want a timeout failure", err)
	}
}

func TestHTTPRequestSSRFGuard(t *testing.T) {
	ts := newTestServer(t)
	r := Builtins(BuiltinsConfig{}) // AllowPrivateNetworks: false
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))

	t.Run("IP literals are refused before any connection", func(t *testing.T) {
		for _, target := range []string{
			ts.URL + "/json",
			"http://10.0.0.1/",
			"http://169.254.169.254/latest/meta-data/",
			"http://[::1]:" + port + "/json",
			"http://0.0.0.0:" + port + "/json",
		} {
			_, f := runBuiltin(t, r, "http.request", fmt.Sprintf(`{"url": %q}`, target), `{}`, 1)
			if f == nil || f.Code != CodeInvalidRequest || !strings.Contains(f.Message, "not allowed") {
				t.Errorf("%s: failure = %+v, want %s", target, f, CodeInvalidRequest)
			}
		}
	})
	t.Run("a hostname resolving to loopback is refused at connect time", func(t *testing.T) {
		target := "http://localhost:" + port + "/json"
		if err := r.Validate("http.request", json.RawMessage(fmt.Sprintf(`{"url": %q}`, target)), json.RawMessage(`{}`)); err != nil {
			t.Fatalf("hostnames pass validation (they are checked when dialled): %v", err)
		}
		_, f := runBuiltin(t, r, "http.request", fmt.Sprintf(`{"url": %q}`, target), `{}`, 1)
		if f == nil || f.Code != CodeBlockedAddress {
			t.Fatalf("failure = %+v, want %s", f, CodeBlockedAddress)
		}
	})
	t.Run("input url is guarded too", func(t *testing.T) {
		_, f := runBuiltin(t, r, "http.request", `{}`, fmt.Sprintf(`{"url": %q}`, "http://localhost:"+port+"/json"), 1)
		if f == nil || f.Code != CodeBlockedAddress {
			t.Fatalf("failure = %+v, want %s", f, CodeBlockedAddress)
		}
	})
	if n := ts.hits.Load(); n != 0 {
		t.Fatalf("the guarded module reached the test server %d times", n)
	}
	// The same server is reachable when private networks are allowed.
	if _, f := runBuiltin(t, Builtins(BuiltinsConfig{AllowPrivateNetworks: true}), "http.request",
		fmt.Sprintf(`{"url": %q}`, "http://localhost:"+port+"/json"), `{}`, 1); f != nil {
		t.Fatalf("with AllowPrivateNetworks: %+v", f)
	}
}

func TestRedactUserinfo(t *testing.T) {
	u, _ := url.Parse("https://user:pw@example.com/x")
	if got := redact(u); got != "https://example.com/x" {
		t.Fatal(got)
	}
}
