package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/client/webhook"
)

// notifyDelivery is one request a notify receiver got.
type notifyDelivery struct {
	header http.Header
	body   []byte
}

// notifyReceiver is an HTTPS receiver of workflow.run.terminal webhooks that answers 500 to
// its first fail requests.
type notifyReceiver struct {
	srv  *httptest.Server
	fail int
	mu   sync.Mutex
	got  []notifyDelivery
}

func newNotifyReceiver(t *testing.T, fail int) *notifyReceiver {
	n := &notifyReceiver{fail: fail}
	n.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n.mu.Lock()
		defer n.mu.Unlock()
		n.got = append(n.got, notifyDelivery{header: r.Header.Clone(), body: body})
		if len(n.got) <= n.fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// ids lists the delivery ids received for run, in order.
func (n *notifyReceiver) ids(run string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, d := range n.got {
		if id := d.header.Get("x-delivery-id"); strings.HasPrefix(id, run+":") {
			out = append(out, id)
		}
	}
	return out
}

// waitFor waits until run's deliveries are want and returns the last.
func (n *notifyReceiver) waitFor(t *testing.T, run string, want ...string) notifyDelivery {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !slices.Equal(n.ids(run), want) {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries of run %s: %v, want %v", run, n.ids(run), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := len(n.got) - 1; ; i-- {
		if n.got[i].header.Get("x-delivery-id") == want[len(want)-1] {
			return n.got[i]
		}
	}
}

// notifyDef is a workflow of one stage of module (core.echo or core.fail) that notifies url.
func notifyDef(name, module, url string) string {
	return fmt.Sprintf(`{"name": %q, "notify": {"url": %q, "secret": "whsec_run", "headers": {"X-Tenant": "acme"}},
	  "components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "s", "module": %q}],
	  "edges": [{"from": "t", "to": "s"}]}`, name, url, module)
}

// checkTerminal checks a delivery: the SPEC.md 6.1 headers, the caller's header, a signature
// client/webhook verifies, and the run detail as GET answers it now as the body.
func checkTerminal(t *testing.T, c *rawCaller, d notifyDelivery, run, status string) {
	t.Helper()
	if err := webhook.Verify("whsec_run", d.header, d.body, 0); err != nil {
		t.Fatalf("signature: %v", err)
	}
	if d.header.Get("x-event") != "workflow.run.terminal" || d.header.Get("X-Tenant") != "acme" {
		t.Fatalf("headers %v", d.header)
	}
	r := c.do(http.MethodGet, "/v1/sdk/workflows/executions/"+run, nil)
	mustStatus(t, r, http.StatusOK, "GET run")
	var got, want bytes.Buffer
	if json.Compact(&got, d.body) != nil || json.Compact(&want, r.body) != nil || got.String() != want.String() {
		t.Fatalf("body %s\nwant the run detail %s", d.body, r.body)
	}
	var m map[string]any
	if json.Unmarshal(d.body, &m) != nil || m["status"] != status || m["id"] != run {
		t.Fatalf("body %s, want run %s %s", d.body, run, status)
	}
}

// A definition's notify is told, signed, when each run ends: completed and failed; a receiver
// failing first gets a retry; replay-callback re-delivers; a bad notify is a 400 naming the
// field, and the saved definition shows no secret.
func TestRunNotifyBlackBox(t *testing.T) {
	ok, flaky := newNotifyReceiver(t, 0), newNotifyReceiver(t, 1)
	svc := startSDKService(t, 1000, "SWITCHYARD_WEBHOOK_CA_FILE="+(&hookReceiver{srv: ok.srv}).caFile(t),
		"SWITCHYARD_WEBHOOK_ALLOW_PRIVATE=true", "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	api := svc.ownerAPI(t)
	base := "/v1/workspaces/" + svc.key.WorkspaceID + "/workflows"
	create := func(def string) string {
		t.Helper()
		st, wf := api.call("POST", base, def)
		if st != http.StatusCreated {
			t.Fatalf("create: %d %v", st, wf)
		}
		return wf["id"].(string)
	}
	echo := create(notifyDef("echo", "core.echo", ok.srv.URL+"/runs"))

	t.Run("the saved definition shows the url and signed, never the secret", func(t *testing.T) {
		st, wf := api.call("GET", base+"/"+echo, "")
		raw, _ := json.Marshal(wf)
		notify, _ := json.Marshal(wf["notify"])
		if st != http.StatusOK || string(notify) != fmt.Sprintf(`{"headerNames":["X-Tenant"],"signed":true,"url":%q}`, ok.srv.URL+"/runs") ||
			strings.Contains(string(raw), "whsec_run") || strings.Contains(string(raw), "acme") {
			t.Fatalf("GET workflow: %d %s", st, raw)
		}
	})
	t.Run("a completed run delivers one signed workflow.run.terminal", func(t *testing.T) {
		run := c.trigger(t, echo, `{"n": 1}`)
		pollRun(t, c, run, 30*time.Second, terminal)
		checkTerminal(t, c, ok.waitFor(t, run, run+":1"), run, "COMPLETED")

		t.Run("replay-callback re-delivers", func(t *testing.T) {
			r := c.post("/v1/sdk/workflows/executions/"+run+"/replay-callback", "")
			mustStatus(t, r, http.StatusOK, "replay-callback")
			if r.json(t)["id"] != run {
				t.Fatalf("replay answered %s", r.body)
			}
			checkTerminal(t, c, ok.waitFor(t, run, run+":1", run+":2"), run, "COMPLETED")
		})
	})
	t.Run("a failed run delivers one signed workflow.run.terminal", func(t *testing.T) {
		run := c.trigger(t, create(notifyDef("fail", "core.fail", ok.srv.URL+"/runs")), "")
		pollRun(t, c, run, 30*time.Second, terminal)
		checkTerminal(t, c, ok.waitFor(t, run, run+":1"), run, "FAILED")
	})
	t.Run("a receiver failing first gets a retry", func(t *testing.T) {
		run := c.trigger(t, create(notifyDef("flaky", "core.echo", flaky.srv.URL+"/runs")), "")
		checkTerminal(t, c, flaky.waitFor(t, run, run+":1", run+":2"), run, "COMPLETED")
	})
	t.Run("a bad notify is a 400 naming the field", func(t *testing.T) {
		for def, field := range map[string]string{
			`{"url": "http://example.com/hook"}`: "notify.url",
			`{"secret": "s"}`:                    "notify.url",
			`{"url": "https://example.com/hook", "headers": {"x-event": "x"}}`: "notify.headers.x-event",
		} {
			st, body := api.call("POST", base, fmt.Sprintf(`{"name": "bad", "notify": %s, "components": [{"id": "t", "module": "ON_API_CALLED"}]}`, def))
			if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.HasPrefix(msg, field+":") {
				t.Fatalf("notify %s: %d %v, want 400 naming %s", def, st, body, field)
			}
		}
	})

	stopAndAudit(t, svc.cli, svc.srv, svc.key.WorkspaceID)
}
