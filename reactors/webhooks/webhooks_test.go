package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/client/webhook"
	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/webhooks"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/testenv"
)

// delivery is one request the receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTPS endpoint; answer decides the status of the n-th request (1-based).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []delivery
	answer func(n int, w http.ResponseWriter)
}

func newReceiver(t testing.TB, answer func(n int, w http.ResponseWriter)) *receiver {
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{header: r.Header.Clone(), body: body})
		n := len(rc.got)
		rc.mu.Unlock()
		if rc.answer != nil {
			rc.answer(n, w)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func (rc *receiver) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(rc.srv.Certificate())
	return p
}

type fixture struct {
	env    *testenv.Env
	ws     string
	sealer *seal.Sealer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	key, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t)
	return &fixture{env: env, ws: env.Workspace(t, 100000), sealer: s}
}

func quiet() logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return l
}

// start runs a dispatcher with quick retries trusting rc's certificate, and returns once it
// follows the log: a test that ends an execution right after must not race the subscription
// and fall back on the sweep, which on a busy machine waits for the read model to catch up.
// The request timeout is generous for the same reason: a TLS handshake with both cores busy can
// take seconds, and no test here waits for it to expire.
func (f *fixture) start(t *testing.T, rc *receiver, worker string, allowPrivate bool) {
	t.Helper()
	d := webhooks.New(f.env.Store, commands.New(f.env.Store), f.env.Queries, f.sealer, webhooks.Config{Worker: worker,
		AllowPrivate: allowPrivate, RootCAs: rc.roots(), RetryBase: 20 * time.Millisecond, RetryFactor: 2,
		LeaseMargin: 100 * time.Millisecond, Timeout: 15 * time.Second, SweepInterval: 50 * time.Millisecond,
		SweepGrace: 50 * time.Millisecond, Logger: quiet()})
	testenv.Go(t, d.Run)
	select {
	case <-d.Ready():
	case <-time.After(60 * time.Second):
		t.Fatal("the dispatcher did not start following the log")
	}
}

// finished submits an execution with the callback and completes it.
func (f *fixture) finished(t testing.TB, callbackURL, secret string, headers map[string]string, attempts int) string {
	t.Helper()
	ctx := context.Background()
	var st execution.State
	var err error
	if strings.HasPrefix(callbackURL, "http:") {
		// The submit refuses plain http; the dispatcher must refuse it too, for an event that
		// got into the log some other way.
		st.ID = uuid.NewString()
		raw, _ := json.Marshal(execution.Submitted{ExecutionID: st.ID, WorkspaceID: f.ws, Module: "core.echo",
			Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: attempts,
			Callback: execution.Callback{URL: callbackURL}, At: time.Now().UTC()})
		_, err = f.env.Store.Append(ctx, commands.ExecutionStream(st.ID), eventstore.NoStream(),
			eventstore.EventData{ID: uuid.New(), Type: execution.Submitted{}.EventType(), Data: raw})
	} else {
		cb := commands.CallbackRequest{URL: callbackURL, Secret: secret, Headers: headers}
		st, err = commands.New(f.env.Store, commands.WithSealer(f.sealer)).Executions.SubmitExecution(ctx, commands.SubmitExecution{WorkspaceID: f.ws,
			Module: "core.echo", Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: attempts, Callback: cb})
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Cmds.Attempts.ClaimExecution(ctx, st.ID, "test", func(execution.State) time.Duration { return time.Minute }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Cmds.Attempts.CompleteExecution(ctx, st.ID, "test", 1, json.RawMessage(`{"n":1}`), 0); err != nil {
		t.Fatal(err)
	}
	return st.ID
}

// settled waits until id's open delivery round is over and returns the state.
func (f *fixture) settled(t *testing.T, id string) execution.State {
	t.Helper()
	var st execution.State
	testenv.Eventually(t, 60*time.Second, "the delivery round of "+id+" to end", func() bool {
		var err error
		st, err = commands.New(f.env.Store).Executions.Execution(context.Background(), id)
		return err == nil && st.Delivery.AttemptCount > 0 && !st.Delivery.Pending
	})
	return st
}

// statusOf reads lastError's statusCode.
func statusOf(lastError json.RawMessage) int {
	var e struct {
		StatusCode int `json:"statusCode"`
	}
	_ = json.Unmarshal(lastError, &e)
	return e.StatusCode
}

// hmacHex is the test's own implementation of the SPEC.md 6.1 signature.
func hmacHex(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	return hex.EncodeToString(m.Sum(nil))
}

func TestSignedDeliveryHeadersAndSignature(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, nil)
	f.start(t, rc, "w1", true)
	before := time.Now()
	id := f.finished(t, rc.srv.URL+"/hook?x=1", "whsec_test", map[string]string{"X-Tenant": "acme", "Authorization": "Bearer t0k"}, 1)
	st := f.settled(t, id)
	got := rc.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	d := got[0]
	want := map[string]string{
		"X-Delivery-Id":       id + ":1",
		"X-Event":             "component.execution.terminal",
		"X-Signature-Version": "v1",
		"Content-Type":        "application/json",
		"X-Tenant":            "acme",
		"Authorization":       "Bearer t0k",
	}
	for name, v := range want {
		if d.header.Get(name) != v {
			t.Errorf("header %s = %q, want %q", name, d.header.Get(name), v)
		}
	}
	if !strings.Contains(d.header.Get("User-Agent"), "Switchyard") {
		t.Errorf("User-Agent %q does not name Switchyard", d.header.Get("User-Agent"))
	}
	ts := d.header.Get("X-Signature-Timestamp")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Fatalf("x-signature-timestamp %q is not a current ISO 8601 time: %v", ts, err)
	}
	if sig := d.header.Get("X-Signature"); sig != "sha256="+hmacHex("whsec_test", ts, d.body) {
		t.Fatalf("x-signature %q does not verify", sig)
	}
	if err := webhook.Verify("whsec_test", d.header, d.body, 0); err != nil {
		t.Fatalf("client/webhook.Verify: %v", err)
	}
	if err := webhook.Verify("wrong", d.header, d.body, 0); err == nil {
		t.Fatal("a wrong secret verified")
	}
	if strings.Contains(string(d.body), "whsec_test") || strings.Contains(string(d.body), "t0k") {
		t.Fatal("the body leaks a secret")
	}
	var body struct {
		ID       string          `json:"id"`
		Status   string          `json:"status"`
		Output   json.RawMessage `json:"output"`
		Callback map[string]any  `json:"callback"`
	}
	if err := json.Unmarshal(d.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.ID != id || body.Status != "COMPLETED" || string(body.Output) != `{"n":1}` {
		t.Fatalf("body %s", d.body)
	}
	cb := body.Callback
	if cb["url"] != rc.srv.URL+"/hook?x=1" || cb["signed"] != true || cb["signatureAlgorithm"] != "hmac-sha256-v1" ||
		cb["attemptCount"] != float64(1) || cb["lastAttemptAt"] == nil || fmt.Sprint(cb["headerNames"]) != "[Authorization X-Tenant]" {
		t.Fatalf("callback in the body: %v", cb)
	}
	r := st.Record()
	if r.Callback.AttemptCount != 1 || r.Callback.DeliveredAt == nil || string(r.Callback.LastError) != "null" {
		t.Fatalf("callback after delivery: %+v", r.Callback)
	}
}

func TestUnsignedDeliveryHasNoSignatureHeaders(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, nil)
	f.start(t, rc, "w1", true)
	f.settled(t, f.finished(t, rc.srv.URL, "", nil, 1))
	h := rc.deliveries()[0].header
	for _, name := range []string{"X-Signature", "X-Signature-Version", "X-Signature-Timestamp"} {
		if _, ok := h[name]; ok {
			t.Errorf("unsigned delivery carries %s", name)
		}
	}
}

func TestFailTwiceThenSucceed(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	f.start(t, rc, "w1", true)
	id := f.finished(t, rc.srv.URL, "s", nil, 3)
	st := f.settled(t, id)
	r := st.Record()
	if r.Callback.AttemptCount != 3 || r.Callback.DeliveredAt == nil || string(r.Callback.LastError) != "null" {
		t.Fatalf("callback: %+v", r.Callback)
	}
	var ids []string
	for _, d := range rc.deliveries() {
		ids = append(ids, d.header.Get("X-Delivery-Id"))
	}
	if want := []string{id + ":1", id + ":2", id + ":3"}; !slices.Equal(ids, want) {
		t.Fatalf("delivery ids %v, want %v", ids, want)
	}
	// The body of the third attempt carries the second's error: the fold is the same one.
	var body struct {
		Callback struct {
			AttemptCount int             `json:"attemptCount"`
			LastError    json.RawMessage `json:"lastError"`
		} `json:"callback"`
	}
	_ = json.Unmarshal(rc.deliveries()[2].body, &body)
	if body.Callback.AttemptCount != 3 || statusOf(body.Callback.LastError) != 503 {
		t.Fatalf("third body's callback: %+v %s", body.Callback, body.Callback.LastError)
	}
}

func TestThreeFailuresLeaveLastError(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) })
	f.start(t, rc, "w1", true)
	st := f.settled(t, f.finished(t, rc.srv.URL, "", nil, 3))
	r := st.Record()
	if r.Callback.AttemptCount != 3 || r.Callback.DeliveredAt != nil || statusOf(r.Callback.LastError) != 502 {
		t.Fatalf("callback: %+v %s", r.Callback, r.Callback.LastError)
	}
	if n := len(rc.deliveries()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestGoneStopsRetries(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	f.start(t, rc, "w1", true)
	st := f.settled(t, f.finished(t, rc.srv.URL, "", nil, 3))
	if st.Delivery.AttemptCount != 1 || statusOf(st.Delivery.LastError) != 410 {
		t.Fatalf("after 410: %+v", st.Delivery)
	}
}

func TestReplayRedeliversWithNextAttemptNumber(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, nil)
	f.start(t, rc, "w1", true)
	id := f.finished(t, rc.srv.URL, "s", nil, 1)
	first := f.settled(t, id)
	if _, err := f.env.Cmds.Webhooks.ReplayWebhook(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the replayed delivery", func() bool { return len(rc.deliveries()) == 2 })
	st := f.settled(t, id)
	if got := rc.deliveries()[1].header.Get("X-Delivery-Id"); got != id+":2" {
		t.Fatalf("replay delivery id %q, want %s:2", got, id)
	}
	if st.Delivery.AttemptCount != 2 || !st.Delivery.DeliveredAt.After(first.Delivery.DeliveredAt) {
		t.Fatalf("after replay: %+v", st.Delivery)
	}
}

// A replay asked for while the round's last attempt is in flight, which then fails, still leads
// to a delivery attempt made after the request (issue 14.5).
func TestReplayDuringLastAttemptIsNotSwallowed(t *testing.T) {
	f := newFixture(t)
	inFlight, replayed := make(chan struct{}), make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2:
			close(inFlight)
			<-replayed
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	// Registered after the receiver, so it runs before the receiver's Close, which waits for
	// the held request.
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(replayed) }) })
	f.start(t, rc, "w1", true)
	id := f.finished(t, rc.srv.URL, "", nil, 2)
	select {
	case <-inFlight:
	case <-time.After(60 * time.Second):
		t.Fatal("the round's second attempt never came")
	}
	st, err := f.env.Cmds.Webhooks.ReplayWebhook(context.Background(), id)
	release.Do(func() { close(replayed) })
	if err != nil {
		t.Fatal(err)
	}
	if st.Delivery.AttemptCount != 2 {
		t.Fatalf("replay asked during attempt %d, want 2", st.Delivery.AttemptCount)
	}
	testenv.Eventually(t, 60*time.Second, "a delivery after the replay", func() bool { return len(rc.deliveries()) >= 3 })
	st = f.settled(t, id)
	if got := rc.deliveries()[2].header.Get("X-Delivery-Id"); got != id+":3" {
		t.Fatalf("delivery after the replay has id %q, want %s:3", got, id)
	}
	if st.Delivery.DeliveredAt.IsZero() || st.Delivery.AttemptCount != 3 {
		t.Fatalf("after the replay: %+v", st.Delivery)
	}
}

// An attempt claimed by a worker that died before recording is sent again with the same
// delivery id once its lease runs out, and recorded once.
func TestCrashedAttemptIsRetriedWithSameID(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, nil)
	id := f.finished(t, rc.srv.URL, "", nil, 1)
	if _, err := f.env.Cmds.Webhooks.StartWebhookAttempt(context.Background(), id, "dead", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	f.start(t, rc, "w1", true)
	st := f.settled(t, id)
	if got := rc.deliveries(); len(got) != 1 || got[0].header.Get("X-Delivery-Id") != id+":1" {
		t.Fatalf("deliveries after takeover: %d", len(got))
	}
	if st.Delivery.AttemptCount != 1 || st.Delivery.DeliveredAt.IsZero() {
		t.Fatalf("after takeover: %+v", st.Delivery)
	}
}

// Two dispatchers on one store: each attempt reaches the receiver once.
func TestTwoDispatchersDeliverEachAttemptOnce(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, nil)
	f.start(t, rc, "a", true)
	f.start(t, rc, "b", true)
	var ids []string
	for range 40 {
		ids = append(ids, f.finished(t, rc.srv.URL, "", nil, 1))
	}
	for _, id := range ids {
		f.settled(t, id)
	}
	seen := map[string]int{}
	for _, d := range rc.deliveries() {
		seen[d.header.Get("X-Delivery-Id")]++
	}
	for _, id := range ids {
		if seen[id+":1"] != 1 {
			t.Fatalf("%s:1 delivered %d times", id, seen[id+":1"])
		}
	}
}

// The SSRF guard refuses, after DNS resolution, every loopback, private, link-local and
// metadata destination unless allowed; an http URL is never sent.
func TestSSRFGuardRefusesPrivateDestinations(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, nil)
	f.start(t, rc, "w1", false)
	u, _ := url.Parse(rc.srv.URL)
	port := u.Port()
	cases := map[string]string{
		"loopback":              "https://127.0.0.1:" + port + "/",
		"private 10/8":          "https://10.0.0.1/",
		"metadata":              "https://169.254.169.254/latest/meta-data",
		"ipv6 loopback":         "https://[::1]:" + port + "/",
		"name resolving to lo":  "https://localhost:" + port + "/",
		"plain http, not https": "http://example.com/",
	}
	ids := map[string]string{}
	for name, target := range cases {
		ids[name] = f.finished(t, target, "", nil, 1)
	}
	for name, id := range ids {
		st := f.settled(t, id)
		if !st.Delivery.DeliveredAt.IsZero() || len(st.Delivery.LastError) == 0 {
			t.Errorf("%s: %+v", name, st.Delivery)
			continue
		}
		var le struct {
			NetworkError string `json:"networkError"`
			Message      string `json:"message"`
		}
		_ = json.Unmarshal(st.Delivery.LastError, &le)
		if name == "plain http, not https" {
			if !strings.Contains(le.Message, "https") {
				t.Errorf("%s: lastError %s", name, st.Delivery.LastError)
			}
			continue
		}
		if le.NetworkError != "blocked_address" {
			t.Errorf("%s: lastError %s, want a blocked address", name, st.Delivery.LastError)
		}
		if name == "name resolving to lo" && (strings.Contains(le.Message, "127.0.0.1") || strings.Contains(le.Message, "::1")) {
			t.Errorf("%s: lastError %s shows the resolved address", name, st.Delivery.LastError)
		}
	}
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("the guarded dispatcher reached the loopback receiver %d times", n)
	}
}

// A refused connection is described in words: lastError shows neither the resolved address
// nor the dialler's wording (issue 14.11).
func TestNetworkErrorShowsNoAddress(t *testing.T) {
	f := newFixture(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close() // nothing listens there any more
	rc := newReceiver(t, nil)
	f.start(t, rc, "w1", true)
	st := f.settled(t, f.finished(t, "https://localhost:"+port+"/", "", nil, 1))
	var le struct {
		NetworkError string `json:"networkError"`
		Message      string `json:"message"`
	}
	_ = json.Unmarshal(st.Delivery.LastError, &le)
	if le.NetworkError != "connection" || !strings.Contains(le.Message, "refused") {
		t.Fatalf("lastError %s, want a refused connection", st.Delivery.LastError)
	}
	for _, leak := range []string{"127.0.0.1", "::1", "dial tcp", port} {
		if strings.Contains(le.Message, leak) {
			t.Fatalf("lastError message %q shows %q", le.Message, leak)
		}
	}
}

// A dispatcher stopped while it starts (serve told to stop at once) stops cleanly: its
// context's end is not an error.
func TestStopDuringStartUpIsClean(t *testing.T) {
	f := newFixture(t)
	d := webhooks.New(f.env.Store, commands.New(f.env.Store), f.env.Queries, f.sealer, webhooks.Config{Logger: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatalf("run stopped during start-up = %v, want nil", err)
	}
}
