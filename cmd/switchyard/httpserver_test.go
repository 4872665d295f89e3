package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// serveHTTP runs newHTTPServer with handler on a loopback port and returns its address.
func serveHTTP(t *testing.T, readTimeout time.Duration, handler http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(handler, readTimeout)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// A client that sends its body a byte at a time is cut off after the read timeout.
func TestSlowBodyIsCutOff(t *testing.T) {
	addr := serveHTTP(t, 200*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body not read in time", http.StatusRequestTimeout)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	// The server must give up on the body on its own; 20 s is far beyond the 200 ms timeout.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.ReadAll(conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection was still open 20 s after a 200 ms read timeout")
	}
}

// A server-sent-event stream and a request that waits after reading its body both outlive the
// read timeout.
func TestLongResponsesOutliveTheReadTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	addr := serveHTTP(t, timeout, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		// Hold the response open for several timeouts, as a stream or a waitForMs does.
		select {
		case <-r.Context().Done():
			return
		case <-time.After(10 * timeout):
		}
		_, _ = io.WriteString(w, "data: "+string(body)+"\n\n")
	})
	for _, tc := range []struct{ name, method, body string }{
		{"stream", http.MethodGet, ""},
		{"wait after a body", http.MethodPost, `{"waitForMs":30000}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, tc.method, "http://"+addr+"/", strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if err != nil || line != "data: "+tc.body+"\n" {
				t.Fatalf("status %d, first line %q, err %v: the response did not outlive the body timeout", resp.StatusCode, line, err)
			}
		})
	}
}
