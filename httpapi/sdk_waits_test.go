package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/testenv"
)

// waitClock is the injected clock of the wait tests: commands and the scheduler read it, and
// a test moves it forward instead of sleeping.
type waitClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *waitClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *waitClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// waitStack is the SDK's workflow routes and the approval pages over a database, with a
// scheduler and an executor running on an injected clock.
type waitStack struct {
	guard *guardStack
	cmds  *commands.Commands
	clock *waitClock
	ws    string
	key   commands.APIKeyMinted
}

func newWaitStack(t *testing.T) *waitStack {
	t.Helper()
	env := testenv.New(t)
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category, run.Category}}, log)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sealKey, _ := seal.GenerateKey()
	sealer, err := seal.New(sealKey)
	if err != nil {
		t.Fatal(err)
	}
	clock := &waitClock{now: time.Now().UTC()}
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	reg := modules.Builtins(modules.BuiltinsConfig{})
	cmds := commands.New(env.Store, commands.WithModules(reg), commands.WithSealer(sealer), commands.WithClock(clock.Now),
		commands.WithBaseURL(srv.URL))
	env.Cmds = cmds
	ex := executor.New(env.Store, cmds, env.Queries, reg, hub, executor.Config{SweepInterval: 100 * time.Millisecond,
		SweepGrace: 100 * time.Millisecond, DrainTimeout: time.Second, Logger: log, Sealer: sealer})
	cmds = commands.WithRunner(cmds, ex)
	testenv.Go(t, ex.Run)
	testenv.Go(t, scheduler.New(env.Store, cmds, env.Queries, scheduler.Config{SweepInterval: 100 * time.Millisecond,
		SweepGrace: 200 * time.Millisecond, Logger: log, Now: clock.Now, WaitPoll: 20 * time.Millisecond}).Run)
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(cmds.Workspaces.APIKey), Logger: log,
		RatePerSecond: 10000, Burst: 10000})
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: log})
	(&httpapi.SDKWorkflows{Cmds: cmds, Queries: env.Queries, Hub: hub, Auth: auth, Heartbeat: time.Second}).Mount(server.V1)
	(&httpapi.Approvals{Cmds: cmds}).Mount(server.Router)
	handler = server.Handler()
	g := &guardStack{core: testCore{env: env, hub: hub, log: log, reg: reg, sealer: sealer}, srv: srv}
	s := &waitStack{guard: g, cmds: cmds, clock: clock}
	s.ws = env.Workspace(t, 1000)
	s.key = g.key(t, s.ws)
	return s
}

// workflow saves a definition: the trigger t, then components and edges as given.
func (s *waitStack) workflow(t *testing.T, components, edges string) string {
	t.Helper()
	var d workflow.Definition
	js := fmt.Sprintf(`{"name": "w-%d", "components": [{"id": "t", "module": "ON_API_CALLED"}, %s], "edges": [%s]}`,
		time.Now().UnixNano(), components, edges)
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := s.cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: s.ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	return wf.ID
}

// trigger starts a run over HTTP and returns its id.
func (s *waitStack) trigger(t *testing.T, wf, body string) string {
	t.Helper()
	resp, b := s.guard.do(t, s.key, http.MethodPost, "/v1/sdk/workflows/"+wf, body)
	var runs []commands.TriggeredRun
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &runs) != nil || len(runs) != 1 {
		t.Fatalf("trigger: %d %s", resp.StatusCode, b)
	}
	return runs[0].RunID
}

// get reads a run over HTTP.
func (s *waitStack) get(t *testing.T, runID string) run.Detail {
	t.Helper()
	resp, b := s.guard.do(t, s.key, http.MethodGet, "/v1/sdk/workflows/executions/"+runID, "")
	var d run.Detail
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &d) != nil {
		t.Fatalf("get run: %d %s", resp.StatusCode, b)
	}
	return d
}

// waitFor reads the run over HTTP until ok holds for it.
func (s *waitStack) waitFor(t *testing.T, runID, what string, ok func(run.Detail) bool) run.Detail {
	t.Helper()
	var d run.Detail
	testenv.Eventually(t, 20*time.Second, what, func() bool {
		d = s.get(t, runID)
		return ok(d)
	})
	return d
}

func stageNamed(d run.Detail, ref string) run.StageView {
	for _, st := range d.RunStages {
		if st.ReferenceID == ref {
			return st
		}
	}
	return run.StageView{}
}

func waiting(ref string) func(run.Detail) bool {
	return func(d run.Detail) bool { return stageNamed(d, ref).WaitingFor != nil }
}

func ended(d run.Detail) bool { return d.Status.Terminal() }

func (s *waitStack) signal(t *testing.T, runID, body string) (int, commands.SignalResult, string) {
	t.Helper()
	resp, b := s.guard.do(t, s.key, http.MethodPost, "/v1/sdk/workflows/executions/"+runID+"/signals", body)
	var res commands.SignalResult
	_ = json.Unmarshal(b, &res)
	return resp.StatusCode, res, string(b)
}

func TestWaitForThroughHTTP(t *testing.T) {
	s := newWaitStack(t)
	wf := s.workflow(t, `{"id": "w", "module": "WAIT", "config": {"for": "90m"}}, {"id": "a", "module": "core.echo"}`,
		`{"from": "t", "to": "w"}, {"from": "w", "to": "a"}`)
	start := s.clock.Now()
	id := s.trigger(t, wf, `{"order": 7}`)
	d := s.waitFor(t, id, "the wait to start", waiting("w"))
	w := stageNamed(d, "w")
	if w.Status != run.StageStatusRunning || w.WaitingFor.Kind != "for" || w.CreditUsage != 0 || w.ExecutionEventID != nil ||
		w.WaitingFor.Until.Before(start.Add(90*time.Minute)) {
		t.Fatalf("waiting stage: %+v %+v", w, w.WaitingFor)
	}
	s.clock.Add(89 * time.Minute)
	if d := s.get(t, id); stageNamed(d, "w").Status != run.StageStatusRunning {
		t.Fatalf("the wait ended before its time: %+v", stageNamed(d, "w"))
	}
	s.clock.Add(time.Minute + time.Second)
	d = s.waitFor(t, id, "the run to end after the wait", ended)
	if d.Status != run.StatusCompleted || string(stageNamed(d, "a").Output) != `{"order":7}` || stageNamed(d, "w").WaitingFor != nil {
		t.Fatalf("after the wait: %s %s", d.Status, stageNamed(d, "a").Output)
	}
}

func TestWaitUntilThroughHTTP(t *testing.T) {
	s := newWaitStack(t)
	wf := s.workflow(t, `{"id": "w", "module": "WAIT", "config": {"until": "payload.due"}}`, `{"from": "t", "to": "w"}`)
	due := s.clock.Now().Add(36 * time.Hour).Truncate(time.Second)
	id := s.trigger(t, wf, fmt.Sprintf(`{"due": %q}`, due.Format(time.RFC3339)))
	w := stageNamed(s.waitFor(t, id, "the wait to start", waiting("w")), "w")
	if w.WaitingFor.Kind != "until" || !w.WaitingFor.Until.Equal(due) {
		t.Fatalf("until: %+v", w.WaitingFor)
	}
	s.clock.Add(36 * time.Hour)
	if d := s.waitFor(t, id, "the run to end", ended); d.Status != run.StatusCompleted {
		t.Fatalf("run %s", d.Status)
	}
	// A definition whose until does not compile is refused, naming the field.
	resp, b := s.guard.do(t, s.key, http.MethodGet, "/v1/sdk/workflows/executions/"+id, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var d workflow.Definition
	_ = json.Unmarshal([]byte(`{"name": "bad-until", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"until": "payload.("}}], "edges": [{"from": "t", "to": "w"}]}`), &d)
	_, err := s.cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: s.ws, Definition: d})
	if err == nil || !strings.Contains(err.Error(), `(component "w").config.until`) {
		t.Fatalf("a bad until: %v", err)
	}
}

func TestSignalBeforeAndAfterItsWait(t *testing.T) {
	s := newWaitStack(t)
	wf := s.workflow(t, `{"id": "w1", "module": "WAIT", "config": {"signal": {"name": "approved"}}},
		{"id": "w2", "module": "WAIT", "config": {"signal": {"name": "paid"}}}, {"id": "a", "module": "core.echo"}`,
		`{"from": "t", "to": "w1"}, {"from": "w1", "to": "w2"}, {"from": "w2", "to": "a"}`)
	id := s.trigger(t, wf, `{}`)
	s.waitFor(t, id, "w1 to wait", waiting("w1"))

	// paid comes before w2 waits: kept on the run.
	code, res, body := s.signal(t, id, `{"name": "paid", "id": "pay-1", "payload": {"amount": 12}}`)
	if code != http.StatusOK || res.Duplicate || len(res.Completed) != 0 {
		t.Fatalf("early signal: %d %s", code, body)
	}
	// approved completes w1; w2 then waits and takes the kept paid at once.
	code, res, body = s.signal(t, id, `{"name": "approved", "id": "ok-1", "payload": {"who": "ana"}}`)
	if code != http.StatusOK || len(res.Completed) != 1 {
		t.Fatalf("signal: %d %s", code, body)
	}
	d := s.waitFor(t, id, "the run to end", ended)
	if d.Status != run.StatusCompleted || string(stageNamed(d, "w1").Output) != `{"who":"ana"}` ||
		string(stageNamed(d, "w2").Output) != `{"amount":12}` || string(stageNamed(d, "a").Output) != `{"amount":12}` {
		t.Fatalf("after the signals: %s %s %s", d.Status, stageNamed(d, "w1").Output, stageNamed(d, "w2").Output)
	}
	// The same id again is a duplicate, even after the run ended.
	if code, res, body = s.signal(t, id, `{"name": "paid", "id": "pay-1"}`); code != http.StatusOK || !res.Duplicate {
		t.Fatalf("duplicate: %d %s", code, body)
	}
	// A new signal to an ended run is a conflict.
	if code, _, body = s.signal(t, id, `{"name": "paid", "id": "pay-2"}`); code != http.StatusConflict {
		t.Fatalf("signal to an ended run: %d %s", code, body)
	}
	for body, field := range map[string]string{`{"id": "x"}`: "name", `{"name": "", "id": "x"}`: "name",
		`{"name": "a", "id": ""}`: "id", `{"name": 3}`: "body", `{"name": "a", "nme": 1}`: "body"} {
		other := s.trigger(t, wf, `{}`)
		if code, _, got := s.signal(t, other, body); code != http.StatusBadRequest || !strings.Contains(got, field) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, code, got, field)
		}
	}
	if code, _, body := s.signal(t, "7f1b1f36-8a52-4c1e-9d0e-000000000000", `{"name": "a"}`); code != http.StatusNotFound {
		t.Fatalf("unknown run: %d %s", code, body)
	}
	otherWs := s.guard.core.env.Workspace(t, 10)
	resp, b := s.guard.do(t, s.guard.key(t, otherWs), http.MethodPost, "/v1/sdk/workflows/executions/"+id+"/signals", `{"name": "a"}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another workspace's run: %d %s", resp.StatusCode, b)
	}
}

func TestSignalWaitTimesOut(t *testing.T) {
	s := newWaitStack(t)
	wf := s.workflow(t, `{"id": "w", "module": "WAIT", "config": {"signal": {"name": "paid", "timeout": "2h", "onTimeout": "continue"}}}`,
		`{"from": "t", "to": "w"}`)
	id := s.trigger(t, wf, `{}`)
	s.waitFor(t, id, "the wait to start", waiting("w"))
	s.clock.Add(2*time.Hour + time.Second)
	d := s.waitFor(t, id, "the run to end", ended)
	if d.Status != run.StatusCompleted || string(stageNamed(d, "w").Output) != `{"timedOut":true}` {
		t.Fatalf("timed out: %s %s", d.Status, stageNamed(d, "w").Output)
	}
}

// postForm posts a form to an approval URL without any credential.
func postForm(t *testing.T, u string, form url.Values) (int, string) {
	t.Helper()
	resp, err := http.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestApprovalByURLDecidesOnce(t *testing.T) {
	s := newWaitStack(t)
	wf := s.workflow(t, `{"id": "w", "module": "WAIT", "config": {"approval": {"question": "Refund order 7?"}}}, {"id": "a", "module": "core.echo"}`,
		`{"from": "t", "to": "w"}, {"from": "w", "to": "a"}`)
	id := s.trigger(t, wf, `{}`)
	w := stageNamed(s.waitFor(t, id, "the approval to wait", waiting("w")), "w")
	u := w.WaitingFor.ApprovalURL
	if w.WaitingFor.Kind != "approval" || !strings.HasPrefix(u, s.guard.srv.URL+"/approvals/") {
		t.Fatalf("waitingFor: %+v", w.WaitingFor)
	}
	// GET shows the question and decides nothing.
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Refund order 7?") || !strings.Contains(string(page), `value="approve"`) {
		t.Fatalf("GET: %d %s", resp.StatusCode, page)
	}
	if d := s.get(t, id); stageNamed(d, "w").Status != run.StageStatusRunning {
		t.Fatal("a GET decided the approval")
	}
	// A tampered token is not found.
	tampered := u[:len(u)-2] + "AA"
	if code, _ := postForm(t, tampered, url.Values{"decision": {"approve"}}); code != http.StatusNotFound {
		t.Fatalf("tampered token: %d", code)
	}
	if code, body := postForm(t, u, url.Values{"by": {"ana"}}); code != http.StatusBadRequest || !strings.Contains(body, "decision") {
		t.Fatalf("no decision: %d %s", code, body)
	}
	if code, body := postForm(t, u, url.Values{"decision": {"approve"}, "by": {"ana"}, "comment": {"fine"}}); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	if code, body := postForm(t, u, url.Values{"decision": {"reject"}, "by": {"eve"}}); code != http.StatusConflict {
		t.Fatalf("second use: %d %s, want 409", code, body)
	}
	d := s.waitFor(t, id, "the run to end", ended)
	if d.Status != run.StatusCompleted || string(stageNamed(d, "w").Output) != `{"approved":true,"by":"ana","comment":"fine"}` {
		t.Fatalf("after approval: %s %s", d.Status, stageNamed(d, "w").Output)
	}
}
