package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// hookReceiver is a real HTTPS webhook receiver that verifies signatures with its own HMAC code
// and records every delivery id it is sent, in order.
type hookReceiver struct {
	srv    *httptest.Server
	secret string
	mu     sync.Mutex
	ids    []string
	bad    []string
	fail   int // answer 500 to this many first requests
}

func newHookReceiver(t *testing.T, secret string, fail int) *hookReceiver {
	h := &hookReceiver{secret: secret, fail: fail}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts := r.Header.Get("x-signature-timestamp")
		m := hmac.New(sha256.New, []byte(h.secret))
		m.Write([]byte(ts + "." + string(body)))
		want := "sha256=" + hex.EncodeToString(m.Sum(nil))
		h.mu.Lock()
		defer h.mu.Unlock()
		id := r.Header.Get("x-delivery-id")
		if !hmac.Equal([]byte(r.Header.Get("x-signature")), []byte(want)) || r.Header.Get("x-event") != "component.execution.terminal" {
			h.bad = append(h.bad, id)
		}
		h.ids = append(h.ids, id)
		if len(h.ids) <= h.fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) seen() (ids, bad []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ids), slices.Clone(h.bad)
}

// caFile writes the receiver's certificate as the PEM bundle SWITCHYARD_WEBHOOK_CA_FILE names.
func (h *hookReceiver) caFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "receiver-ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func callbackOf(m map[string]any) map[string]any {
	cb, _ := m["callback"].(map[string]any)
	return cb
}

// A serve process killed with SIGKILL while a webhook waits for its retry: the restarted
// process delivers the retry, and no attempt is lost or recorded twice. Then replay-callback
// re-delivers with the next attempt number.
func TestWebhookSurvivesSIGKILLDuringBackoff(t *testing.T) {
	rc := newHookReceiver(t, "whsec_e2e", 1)
	svc := startSDKService(t, 100, "SWITCHYARD_WEBHOOK_CA_FILE="+rc.caFile(t), "SWITCHYARD_WEBHOOK_ALLOW_PRIVATE=true")
	c := svc.caller(t, svc.key)
	r := c.submit(fmt.Sprintf(`{"module":"core.echo","input":{"n":7},"config":{},"attempts":2,"callbackUrl":%q,"callbackSecret":"whsec_e2e","callbackHeaders":{"X-Tenant":"acme"}}`,
		rc.srv.URL+"/hooks"))
	mustStatus(t, r, http.StatusOK, "submit")
	id := fmt.Sprint(r.json(t)["id"])

	// The first attempt fails and is recorded; the retry is then backing off (5 s ± 20%).
	m := pollExecution(t, c, id, 30*time.Second, func(m map[string]any) bool {
		cb := callbackOf(m)
		return cb["attemptCount"] == float64(1) && cb["lastError"] != nil
	})
	if cb := callbackOf(m); cb["deliveredAt"] != nil || fmt.Sprint(cb["headerNames"]) != "[X-Tenant]" || cb["signed"] != true {
		t.Fatalf("callback after the first failure: %v", cb)
	}
	if err := svc.srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-svc.srv.done
	if ids, _ := rc.seen(); len(ids) != 1 {
		t.Fatalf("deliveries before the kill: %v (the kill came too late to test a back-off)", ids)
	}

	// It comes back after the back-off ran out, by its clock (restartOffset).
	svc.cli.env = append(svc.cli.env, restartOffset)
	restarted := svc.cli.serveReady()
	m = pollExecution(t, c, id, 60*time.Second, func(m map[string]any) bool { return callbackOf(m)["deliveredAt"] != nil })
	cb := callbackOf(m)
	if cb["attemptCount"] != float64(2) || cb["lastError"] != nil {
		t.Fatalf("callback after the restart: %v", cb)
	}
	ids, bad := rc.seen()
	if want := []string{id + ":1", id + ":2"}; !slices.Equal(ids, want) || len(bad) > 0 {
		t.Fatalf("deliveries %v (bad signatures %v), want %v", ids, bad, want)
	}

	// replay-callback answers the record and re-delivers as attempt 3.
	rp := c.do(http.MethodPost, "/v1/sdk/components/executions/"+id+"/replay-callback?nonce="+strconv.FormatInt(nonces.Add(1), 10), nil)
	mustStatus(t, rp, http.StatusOK, "replay-callback")
	if got := rp.json(t); got["id"] != id || callbackOf(got)["url"] != rc.srv.URL+"/hooks" {
		t.Fatalf("replay answer %s", rp.body)
	}
	pollExecution(t, c, id, 30*time.Second, func(m map[string]any) bool {
		return callbackOf(m)["attemptCount"] == float64(3) && callbackOf(m)["lastError"] == nil && len(func() []string { i, _ := rc.seen(); return i }()) == 3
	})
	ids, bad = rc.seen()
	if ids[2] != id+":3" || len(bad) > 0 {
		t.Fatalf("replayed delivery %v (bad %v)", ids, bad)
	}
	// Unfinished and callback-less executions cannot be replayed.
	plain := c.submit(`{"module":"core.echo","input":{},"config":{},"waitForMs":10000}`)
	mustStatus(t, plain, http.StatusOK, "submit plain")
	pid := fmt.Sprint(plain.json(t)["id"])
	wantErrorBody(t, c.do(http.MethodPost, "/v1/sdk/components/executions/"+pid+"/replay-callback?nonce="+strconv.FormatInt(nonces.Add(1), 10), nil),
		http.StatusConflict, "callbackUrl")
	restarted.stop(t, 30*time.Second)
}
