package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/testenv"
)

// gates holds test.gate executions until the test opens their gate (input {"gate":"name"}).
type gates struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (g *gates) get(name string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.m[name]
	if !ok {
		c = make(chan struct{})
		g.m[name] = c
	}
	return c
}

func (g *gates) open(name string) { close(g.get(name)) }

// sdkStack is the SDK API in process: real Postgres, projections, executor, live hub and auth.
type sdkStack struct {
	env   *testenv.Env
	hub   *livehub.Hub
	srv   *httptest.Server
	gates *gates
	ws    string
	key   commands.APIKeyMinted
	cl    *client.Client
	dials atomic.Int64 // connections the stack's client (cl) dialled
}

func newSDKStack(t *testing.T, heartbeat time.Duration) *sdkStack {
	t.Helper()
	return newSDKStackInPlace(t, heartbeat, 0)
}

// newSDKStackInPlace is newSDKStack whose streams are served in place for inPlace
// (SDKComponents.InPlaceFor; 0 takes them over at once); it counts its client's dials.
func newSDKStackInPlace(t *testing.T, heartbeat, inPlace time.Duration) *sdkStack {
	t.Helper()
	env := testenv.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category}}, log)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g := &gates{m: map[string]chan struct{}{}}
	reg := modules.Builtins(modules.BuiltinsConfig{})
	gate, err := modules.NewModule(modules.Definition{Name: "test.gate", Timeout: 30 * time.Second,
		Run: func(ctx context.Context, call modules.Call) (json.RawMessage, error) {
			var in struct{ Gate string }
			_ = json.Unmarshal(call.Input, &in)
			select {
			case <-g.get(in.Gate):
				return json.RawMessage(`{"opened":"` + in.Gate + `"}`), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(gate); err != nil {
		t.Fatal(err)
	}
	key, _ := seal.GenerateKey()
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	env.Cmds = commands.New(env.Store, commands.WithModules(reg), commands.WithSealer(sealer))
	ex := executor.New(env.Store, env.Cmds, env.Queries, reg, hub, executor.Config{Worker: "t", SweepInterval: 100 * time.Millisecond,
		SweepGrace: 100 * time.Millisecond, DrainTimeout: time.Second, Logger: log})
	env.Cmds = commands.WithRunner(env.Cmds, ex)
	testenv.Go(t, ex.Run)
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(env.Cmds.Workspaces.APIKey),
		RatePerSecond: 10000, Burst: 10000, Logger: log})
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: log})
	(&httpapi.SDKComponents{Cmds: env.Cmds, Registry: reg, Hub: hub, Auth: auth, Heartbeat: heartbeat,
		InPlaceFor: inPlace}).Mount(server.V1)
	s := &sdkStack{env: env, hub: hub, gates: g}
	s.srv = httptest.NewUnstartedServer(server.Handler())
	returns := httpapi.NewConnReturn(nil)
	returns.Attach(s.srv.Config)
	s.srv.Start()
	go func() { _ = s.srv.Config.Serve(returns) }()
	t.Cleanup(func() {
		returns.Close()
		s.srv.Close()
	})
	s.ws, s.key, s.cl = s.newKey(t)
	return s
}

func (s *sdkStack) newKey(t *testing.T) (string, commands.APIKeyMinted, *client.Client) {
	t.Helper()
	ws := s.env.Workspace(t, 100)
	key, err := s.env.Cmds.Workspaces.CreateAPIKey(context.Background(), commands.CreateAPIKey{WorkspaceID: ws, Label: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	counted := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(counted.CloseIdleConnections)
	cl, err := client.New(s.srv.URL, key.APIKey, key.APISecret,
		client.WithHTTPClient(&http.Client{Timeout: 30 * time.Second, Transport: counted}))
	if err != nil {
		t.Fatal(err)
	}
	return ws, key, cl
}

// sseConn is a raw, signed SSE connection read line by line.
type sseConn struct {
	resp *http.Response
	rd   *bufio.Reader
}

// sseMessage is one message: its id and data, or a comment.
type sseMessage struct {
	id, data, comment string
	retry             string
}

func (s *sdkStack) open(t *testing.T, id, lastEventID string) *sseConn {
	t.Helper()
	target := "/v1/sdk/components/executions/" + id + "/stream"
	priv, err := apikeys.ParseSecret(s.key.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+target, nil)
	req.Header.Set(httpapi.HeaderAPIKey, s.key.APIKey)
	req.Header.Set(httpapi.HeaderSDKTimestamp, ts)
	req.Header.Set(httpapi.HeaderSDKSignature, apikeys.Sign(priv, http.MethodGet, target, ts, nil))
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseConn{resp: resp, rd: bufio.NewReader(resp.Body)}
}

// next reads the next message or comment; ok is false at the end of the stream.
func (c *sseConn) next(t *testing.T) (m sseMessage, ok bool) {
	t.Helper()
	for {
		line, err := c.rd.ReadString('\n')
		if err != nil {
			if line != "" {
				t.Fatalf("stream ended inside a message: %q", line)
			}
			return m, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if m.data != "" || m.comment != "" || m.retry != "" {
				return m, true
			}
		case strings.HasPrefix(line, ":"):
			m.comment = line
		case strings.HasPrefix(line, "id: "):
			m.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			m.data = line[6:]
		case strings.HasPrefix(line, "retry: "):
			m.retry = line[7:]
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

// event reads until the next data message and decodes it as a raw map.
func (c *sseConn) event(t *testing.T) (sseMessage, map[string]json.RawMessage) {
	t.Helper()
	for {
		m, ok := c.next(t)
		if !ok {
			t.Fatal("the stream ended before another event")
		}
		if m.data == "" {
			continue
		}
		var e map[string]json.RawMessage
		if err := json.Unmarshal([]byte(m.data), &e); err != nil {
			t.Fatalf("data %q: %v", m.data, err)
		}
		return m, e
	}
}

func statusOfEvent(e map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(e["status"], &s)
	return s
}

func (s *sdkStack) submit(t *testing.T, req client.SubmitRequest) string {
	t.Helper()
	ex, err := s.cl.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return ex.ID
}

// waitRunning waits until the executor has claimed id.
func (s *sdkStack) waitRunning(t *testing.T, id string) {
	testenv.Eventually(t, 10*time.Second, "execution running", func() bool {
		st, err := s.env.Cmds.Executions.Execution(context.Background(), id)
		return err == nil && st.Status == execution.StatusRunning
	})
}

// TestExecutionStream runs on streams served in place (they end within their time in place)
// and on streams whose connection is taken over at once: a client sees them alike.
func TestExecutionStream(t *testing.T) {
	t.Run("in place", func(t *testing.T) { testExecutionStream(t, time.Minute) })
	t.Run("taken over", func(t *testing.T) { testExecutionStream(t, 0) })
}

func testExecutionStream(t *testing.T, inPlace time.Duration) {
	s := newSDKStackInPlace(t, 50*time.Millisecond, inPlace)
	ctx := context.Background()

	t.Run("updates arrive in order and the stream closes after the terminal one", func(t *testing.T) {
		id := s.submit(t, client.SubmitRequest{Module: "test.gate", Input: map[string]string{"gate": "order"}})
		c := s.open(t, id, "")
		if c.resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", c.resp.StatusCode)
		}
		for name, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
			if got := c.resp.Header.Get(name); got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
		first, ok := c.next(t)
		if !ok || first.retry == "" {
			t.Fatalf("first message %+v: want a retry hint", first)
		}
		s.waitRunning(t, id)
		s.gates.open("order")
		var statuses []string
		var lastID int64 = -1
		for {
			m, e := c.event(t)
			n, err := strconv.ParseInt(m.id, 10, 64)
			if err != nil || n <= lastID {
				t.Fatalf("message id %q after %d: ids must increase", m.id, lastID)
			}
			lastID = n
			st := statusOfEvent(e)
			statuses = append(statuses, st)
			if string(e["id"]) != `"`+id+`"` || e["timestamp"] == nil {
				t.Fatalf("event %s", m.data)
			}
			if _, has := e["error"]; has {
				t.Fatalf("error present on a %s event: %s", st, m.data)
			}
			if _, has := e["output"]; has != (st == "COMPLETED") {
				t.Fatalf("output present=%v on a %s event: %s", has, st, m.data)
			}
			if st == "COMPLETED" {
				if string(e["output"]) != `{"opened":"order"}` {
					t.Fatalf("output %s", e["output"])
				}
				break
			}
		}
		got := strings.Join(statuses, ",")
		if got != "CREATED,RUNNING,COMPLETED" && got != "RUNNING,COMPLETED" {
			t.Fatalf("statuses %s", got)
		}
		// The response ends cleanly after it (chunked: its last chunk), nothing else in it.
		if rest, err := io.ReadAll(c.rd); err != nil || strings.Contains(string(rest), "data:") {
			t.Fatalf("after the terminal event: %q, %v; want a clean end", rest, err)
		}
	})

	t.Run("connecting after completion sends one event then closes", func(t *testing.T) {
		ex, err := s.cl.Submit(ctx, client.SubmitRequest{Module: "core.echo", Input: map[string]int{"x": 1}, WaitForMs: 10000})
		if err != nil || ex.Status != "COMPLETED" {
			t.Fatalf("submit: %v %+v", err, ex)
		}
		c := s.open(t, ex.ID, "")
		_, e := c.event(t)
		if statusOfEvent(e) != "COMPLETED" || string(e["output"]) != `{"x":1}` {
			t.Fatalf("event %v", e)
		}
		if m, ok := c.next(t); ok {
			t.Fatalf("stream went on after the terminal event: %+v", m)
		}
	})

	t.Run("failed execution carries the error and no output", func(t *testing.T) {
		ex, err := s.cl.Submit(ctx, client.SubmitRequest{Module: "core.fail", Config: map[string]string{"message": "boom"}, WaitForMs: 10000})
		if err != nil {
			t.Fatal(err)
		}
		if ex.Status != "FAILED" {
			t.Fatalf("core.fail with waitForMs 10000 must answer FAILED: %+v", ex)
		}
		_, e := s.open(t, ex.ID, "").event(t)
		if _, has := e["output"]; has || statusOfEvent(e) != "FAILED" || e["error"] == nil || string(e["error"]) == "null" {
			t.Fatalf("failed event %v", e)
		}
	})

	t.Run("heartbeat", func(t *testing.T) {
		id := s.submit(t, client.SubmitRequest{Module: "test.gate", Input: map[string]string{"gate": "ping"}})
		defer s.gates.open("ping")
		c := s.open(t, id, "")
		for {
			m, ok := c.next(t)
			if !ok {
				t.Fatal("stream ended without a ping")
			}
			if m.comment == ":ping" {
				return
			}
		}
	})

	t.Run("reconnect with Last-Event-ID gets the current state", func(t *testing.T) {
		id := s.submit(t, client.SubmitRequest{Module: "test.gate", Input: map[string]string{"gate": "resume"}})
		s.waitRunning(t, id)
		c := s.open(t, id, "")
		m, e := c.event(t)
		if statusOfEvent(e) != "RUNNING" {
			t.Fatalf("first event %v", e)
		}
		c.resp.Body.Close()
		s.gates.open("resume")
		testenv.Eventually(t, 10*time.Second, "completion", func() bool {
			st, err := s.env.Cmds.Executions.Execution(ctx, id)
			return err == nil && st.Status.Terminal()
		})
		c2 := s.open(t, id, m.id)
		m2, e2 := c2.event(t)
		if statusOfEvent(e2) != "COMPLETED" || m2.id <= m.id {
			t.Fatalf("after reconnecting from %s: %s %s", m.id, m2.id, m2.data)
		}
		// Resuming from the latest id still gets the current state at once (SPEC.md 6.2).
		_, e3 := s.open(t, id, m2.id).event(t)
		if statusOfEvent(e3) != "COMPLETED" {
			t.Fatalf("resume from the latest id: %v", e3)
		}
	})

	t.Run("a disconnected client frees its watch at once", func(t *testing.T) {
		id := s.submit(t, client.SubmitRequest{Module: "test.gate", Input: map[string]string{"gate": "leave"}})
		defer s.gates.open("leave")
		before := s.hub.Watchers()
		c := s.open(t, id, "")
		c.event(t)
		if s.hub.Watchers() != before+1 {
			t.Fatalf("watchers %d, want %d", s.hub.Watchers(), before+1)
		}
		c.resp.Body.Close()
		testenv.Eventually(t, 5*time.Second, "the watch to be released", func() bool { return s.hub.Watchers() == before })
	})

	t.Run("unknown and foreign executions are 404", func(t *testing.T) {
		if c := s.open(t, "00000000-0000-4000-8000-000000000000", ""); c.resp.StatusCode != http.StatusNotFound {
			t.Fatalf("unknown: %d", c.resp.StatusCode)
		}
		_, _, other := s.newKey(t)
		id := s.submit(t, client.SubmitRequest{Module: "core.echo"})
		for _, err := range other.StreamExecution(ctx, id, nil) {
			if !client.IsStatus(err, http.StatusNotFound) {
				t.Fatalf("foreign stream: %v", err)
			}
		}
	})

	t.Run("client StreamExecution and WaitForResult", func(t *testing.T) {
		id := s.streamGated(t, "client")
		res, err := s.cl.WaitForResult(ctx, id, nil)
		if err != nil || res.Status != "COMPLETED" || string(res.Output) != `{"opened":"client"}` {
			t.Fatalf("WaitForResult: %v %+v", err, res)
		}
	})

	t.Run("WaitForResult times out", func(t *testing.T) {
		id := s.submit(t, client.SubmitRequest{Module: "test.gate", Input: map[string]string{"gate": "never"}})
		defer s.gates.open("never")
		_, err := s.cl.WaitForResult(ctx, id, &client.WaitOptions{TimeoutMs: 300})
		if err == nil || err.Error() != "Execution timed out" || !errors.Is(err, client.ErrTimeout) {
			t.Fatalf("err = %v, want Execution timed out", err)
		}
	})
}

func TestReplayCallbackEndpoint(t *testing.T) {
	s := newSDKStack(t, time.Second)
	ctx := context.Background()

	id := s.submit(t, client.SubmitRequest{Module: "test.gate", Input: map[string]string{"gate": "r"}, CallbackURL: "https://hooks.example.com/x"})
	if _, err := s.cl.ReplayCallback(ctx, id); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("replay of an unfinished execution: %v", err)
	}
	s.gates.open("r")
	plain, err := s.cl.Submit(ctx, client.SubmitRequest{Module: "core.echo", WaitForMs: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cl.ReplayCallback(ctx, plain.ID); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("replay without callbackUrl: %v", err)
	}
	res, err := s.cl.WaitForResult(ctx, id, nil)
	if err != nil || res.Status != "COMPLETED" {
		t.Fatal(err)
	}
	_, _, other := s.newKey(t)
	if _, err := other.ReplayCallback(ctx, id); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("replay of another workspace's execution: %v", err)
	}
	// No dispatcher runs here, so the first round stays pending: replays queue nothing more.
	before, _ := s.env.Store.ReadStream(ctx, commands.ExecutionStream(id), 0, 1000)
	for range 3 {
		rec, err := s.cl.ReplayCallback(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.ID != id || rec.Status != "COMPLETED" || rec.Callback.URL == nil || *rec.Callback.URL != "https://hooks.example.com/x" {
			t.Fatalf("replay answer %+v", rec)
		}
	}
	after, _ := s.env.Store.ReadStream(ctx, commands.ExecutionStream(id), 0, 1000)
	if len(after) != len(before) {
		t.Fatalf("replays while a delivery is pending appended %d events", len(after)-len(before))
	}
	if _, err := s.cl.Submit(ctx, client.SubmitRequest{Module: "core.echo", CallbackURL: "http://hooks.example.com/x"}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("an http callbackUrl: %v", err)
	}
}

// Text jsonb cannot store is a 400 naming the field, and the refused submit appends nothing.
func TestSubmitRefusesUnstorableText(t *testing.T) {
	s := newSDKStack(t, 0)
	ctx := context.Background()
	count := func() int {
		var n int
		if err := s.env.Pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		field string
		req   client.SubmitRequest
	}{
		{"input", client.SubmitRequest{Module: "core.echo", Input: map[string]string{"a": "x\x00y"}}},
		{"config", client.SubmitRequest{Module: "core.echo", Config: map[string]string{"\x00": "y"}}},
		{"callbackSecret", client.SubmitRequest{Module: "core.echo", CallbackURL: "https://hooks.example.com/x", CallbackSecret: "a\x00"}},
		{"callbackHeaders.X-A", client.SubmitRequest{Module: "core.echo", CallbackURL: "https://hooks.example.com/x", CallbackHeaders: map[string]string{"X-A": "\x00"}}},
	} {
		before := count()
		_, err := s.cl.Submit(ctx, tc.req)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.StatusCode != http.StatusBadRequest || !strings.Contains(ce.Message, tc.field) {
			t.Fatalf("%s with a NUL: %v, want a 400 naming it", tc.field, err)
		}
		if after := count(); after != before {
			t.Fatalf("%s: the refused submit appended %d events", tc.field, after-before)
		}
	}
}

// A stream that ends within its time in place ends its response and leaves the connection
// to the client; one taken over gives the connection back to the server after the end of its
// response. Either way a client waiting for one call after another by stream dials once,
// where taking each stream's connection over and closing it made it dial for every call.
func TestStreamsLeaveTheirConnectionToTheClient(t *testing.T) {
	for _, c := range []struct {
		name    string
		inPlace time.Duration
	}{{"ended in place", time.Minute}, {"taken over", 0}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSDKStackInPlace(t, time.Second, c.inPlace)
			const calls = 5
			for i := range calls {
				s.streamGated(t, "keep-"+strconv.Itoa(i))
			}
			if got := s.dials.Load(); got != 1 {
				t.Fatalf("the client dialled %d times for %d calls waited for by stream, want once", got, calls)
			}
		})
	}
}

// A connection a stream gave back, which its client keeps open for its next request, does not
// hold the server's shutdown: http.Server would count it idle only once 5 s old.
func TestShutdownClosesTheConnectionsStreamsGaveBack(t *testing.T) {
	s := newSDKStackInPlace(t, time.Second, 0)
	s.streamGated(t, "shutdown")
	if got := s.dials.Load(); got != 1 {
		t.Fatalf("the client dialled %d times, want once", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a given-back connection open: %v", err)
	}
}

// streamGated submits a call of test.gate waiting for gate, follows it with the client's
// StreamExecution from RUNNING, opens the gate while the stream is open, and checks the
// stream saw RUNNING then COMPLETED; it returns the call's id.
func (s *sdkStack) streamGated(t *testing.T, gate string) string {
	t.Helper()
	id := s.submit(t, client.SubmitRequest{Module: "test.gate", Input: map[string]string{"gate": gate}})
	s.waitRunning(t, id)
	var statuses []string
	for e, err := range s.cl.StreamExecution(context.Background(), id, nil) {
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, e.Status)
		if e.Status == "RUNNING" {
			s.gates.open(gate) // the stream is open, and not ended
		}
	}
	if strings.Join(statuses, ",") != "RUNNING,COMPLETED" {
		t.Fatalf("gate %s: statuses %v", gate, statuses)
	}
	return id
}
