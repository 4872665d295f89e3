package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/testenv"
)

// gate is a module whose calls wait until the test opens them, by the id in their input: the
// test decides when each run's stage ends, and how. It counts the calls of each concurrency
// key in flight, to check that a key never runs more than its limit at once.
type gate struct {
	mu       sync.Mutex
	arrived  []string
	inFlight map[string]int
	most     map[string]int
	open     map[string]chan bool
	// uncounted are calls of runs about to be cancelled: a cancelled run frees its slot at
	// once, while its call may go on.
	uncounted map[string]bool
}

func newGate() *gate {
	return &gate{inFlight: map[string]int{}, most: map[string]int{}, open: map[string]chan bool{}, uncounted: map[string]bool{}}
}

func (g *gate) ch(id string) chan bool {
	if g.open[id] == nil {
		g.open[id] = make(chan bool, 1)
	}
	return g.open[id]
}

func (g *gate) run(ctx context.Context, call modules.Call) (json.RawMessage, error) {
	var in struct{ ID, Customer string }
	_ = json.Unmarshal(call.Input, &in)
	g.mu.Lock()
	g.arrived = append(g.arrived, in.ID)
	g.inFlight[in.Customer]++
	g.most[in.Customer] = max(g.most[in.Customer], g.inFlight[in.Customer])
	ch := g.ch(in.ID)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if !g.uncounted[in.ID] {
			g.inFlight[in.Customer]--
		}
		g.mu.Unlock()
	}()
	select {
	case ok := <-ch:
		if !ok {
			return nil, &modules.Failure{Code: "closed", Message: "the gate stayed closed"}
		}
		return json.Marshal(map[string]string{"passed": in.ID})
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pass lets the call of id through (ok) or fails it.
func (g *gate) pass(id string, ok bool) {
	g.mu.Lock()
	ch := g.ch(id)
	g.mu.Unlock()
	ch <- ok
}

// uncount stops counting the running call of id, whose run the test is about to cancel.
func (g *gate) uncount(id, customer string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.uncounted[id] {
		g.uncounted[id] = true
		g.inFlight[customer]--
	}
}

func (g *gate) arrivals() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.arrived)
}

func (g *gate) mostInFlight(customer string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most[customer]
}

// concStack is the SDK and workspace endpoints over a real database, an executor with the
// gate module, and schedulers the test starts and stops itself.
type concStack struct {
	*guardStack
	gate   *gate
	bearer fakeBearer
}

func newConcStack(t *testing.T) *concStack {
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
	g := newGate()
	reg := modules.Builtins(modules.BuiltinsConfig{})
	m, err := modules.NewModule(modules.Definition{Name: "test.gate", Description: "waits for the test", Timeout: 5 * time.Minute, Run: g.run})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	env.Cmds = commands.New(env.Store, commands.WithModules(reg))
	ex := executor.New(env.Store, env.Cmds, projections.NewQueries(env.Pool), reg, hub, executor.Config{SweepInterval: 100 * time.Millisecond,
		SweepGrace: 100 * time.Millisecond, DrainTimeout: time.Second, Logger: log})
	testenv.Go(t, ex.Run)
	core := testCore{env: env, hub: hub, log: log, reg: reg}
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(env.Cmds.Workspaces.APIKey),
		RatePerSecond: 10000, Burst: 10000, Logger: log, ExecutionOwner: httpapi.ExecutionOwnerFrom(env.Cmds)})
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: log})
	(&httpapi.SDKWorkflows{Cmds: env.Cmds, Queries: env.Queries, Hub: hub, Auth: auth, Heartbeat: time.Second}).Mount(server.V1)
	bearer := fakeBearer{}
	(&httpapi.Workspaces{Cmds: env.Cmds, Queries: env.Queries, Auth: bearer}).Mount(server.V1)
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	return &concStack{guardStack: &guardStack{core: core, srv: srv}, gate: g, bearer: bearer}
}

// scheduler starts a scheduler instance holding the database's scheduler lock, as each serve
// process runs one; stop ends it (a process that stops or dies).
func (s *concStack) scheduler(t *testing.T) (stop context.CancelFunc) {
	t.Helper()
	env := s.core.env
	return testenv.Go(t, scheduler.New(env.Store, commands.New(env.Store, commands.WithModules(s.core.reg)), env.Queries,
		scheduler.Config{Logger: s.core.log, SweepInterval: 100 * time.Millisecond, SweepGrace: 200 * time.Millisecond,
			Lock: func(ctx context.Context, fn func(context.Context) error) error {
				return projections.HoldLock(ctx, env.Pool.Config().ConnConfig, "scheduler", fn)
			}}).Run)
}

// workflow creates a workflow through the workspace endpoint: trigger, then a gate stage.
func (s *concStack) workflow(t *testing.T, ws string, limit int) string {
	t.Helper()
	status, body := s.createWorkflow(t, ws, fmt.Sprintf(`{"name": "keyed-%d-%d", "concurrency": {"key": "customer", "limit": %d},
		"components": [{"id": "t", "module": "ON_API_CALLED", "position": [0, 0]}, {"id": "g", "module": "test.gate", "position": [200, 0]}],
		"edges": [{"from": "t", "to": "g"}]}`, limit, time.Now().UnixNano(), limit))
	if status != http.StatusCreated {
		t.Fatalf("create workflow: %d %s", status, body)
	}
	var wf struct {
		ID          string
		Concurrency *struct {
			Key   string
			Limit int
		}
	}
	if err := json.Unmarshal(body, &wf); err != nil || wf.Concurrency == nil || wf.Concurrency.Key != "customer" || wf.Concurrency.Limit != limit {
		t.Fatalf("created workflow: %s", body)
	}
	return wf.ID
}

func (s *concStack) createWorkflow(t *testing.T, ws, def string) (int, []byte) {
	t.Helper()
	st, err := s.core.env.Cmds.Workspaces.Workspace(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for id, role := range st.Members {
		if role == "owner" {
			s.bearer["owner-"+ws] = identity.Principal{UserID: id, ClientID: "app", WorkspaceID: ws, Scopes: []string{identity.ScopeWorkspaceAdmin}}
		}
	}
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/v1/workspaces/"+ws+"/workflows", strings.NewReader(def))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer owner-"+ws)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	return resp.StatusCode, raw
}

// trigger starts a run of customer's through the SDK and returns its id.
func (s *concStack) trigger(t *testing.T, k commands.APIKeyMinted, wf, customer, id string) string {
	t.Helper()
	resp, body := s.do(t, k, http.MethodPost, "/v1/sdk/workflows/"+wf, fmt.Sprintf(`{"customer": %q, "id": %q}`, customer, id))
	var runs []commands.TriggeredRun
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &runs) != nil || len(runs) != 1 {
		t.Fatalf("trigger %s: %d %s", id, resp.StatusCode, body)
	}
	return runs[0].RunID
}

type runDetail struct {
	Status         string
	ConcurrencyKey *string
	WaitingFor     *struct {
		ConcurrencyKey string
		Limit          int
	}
	CancelRequestedAt *time.Time
}

func (s *concStack) run(t *testing.T, k commands.APIKeyMinted, id string) runDetail {
	t.Helper()
	resp, body := s.do(t, k, http.MethodGet, "/v1/sdk/workflows/executions/"+id, "")
	var d runDetail
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &d) != nil {
		t.Fatalf("GET run %s: %d %s", id, resp.StatusCode, body)
	}
	return d
}

// waitArrived waits until the gate call of id has come.
func (s *concStack) waitArrived(t *testing.T, id string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the stage of "+id+" to run", func() bool { return slices.Contains(s.gate.arrivals(), id) })
}

// waitEnded waits until run id ended, with status.
func (s *concStack) waitEnded(t *testing.T, k commands.APIKeyMinted, id, status string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "run "+id+" to end "+status, func() bool { return s.run(t, k, id).Status == status })
}

// mustWait checks that run id waits CREATED for a slot of customer's key.
func (s *concStack) mustWait(t *testing.T, k commands.APIKeyMinted, id, customer string, limit int) {
	t.Helper()
	d := s.run(t, k, id)
	if d.Status != "CREATED" || d.WaitingFor == nil || d.WaitingFor.ConcurrencyKey != customer || d.WaitingFor.Limit != limit {
		t.Fatalf("run %s: %+v, want CREATED waiting for key %s", id, d, customer)
	}
	if slices.Contains(s.gate.arrivals(), id) {
		t.Fatalf("the stage of waiting run %s ran", id)
	}
}

// admissions counts the RunAdmitted events of each run in the log.
func admissions(t *testing.T, store eventstore.Store) map[string]int {
	t.Helper()
	events, err := store.ReadAll(context.Background(), eventstore.Position{}, 100000, eventstore.Filter{Types: []string{run.Admitted{}.EventType()}})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range events {
		var a run.Admitted
		if json.Unmarshal(e.Data, &a) == nil {
			n[a.RunID]++
		}
	}
	return n
}

// Limit 1 per customer: runs of customer a go one at a time, in trigger order, while b's run
// goes alongside; a waiting run starts when the running one completes, fails or is cancelled,
// and a cancelled waiting run never starts.
func TestConcurrencyPerKeyThroughHTTP(t *testing.T) {
	s := newConcStack(t)
	s.scheduler(t)
	ws := s.core.env.Workspace(t, 100)
	k := s.key(t, ws)
	wf := s.workflow(t, ws, 1)

	a1 := s.trigger(t, k, wf, "a", "a1")
	a2 := s.trigger(t, k, wf, "a", "a2")
	b1 := s.trigger(t, k, wf, "b", "b1")
	a3 := s.trigger(t, k, wf, "a", "a3")
	s.waitArrived(t, "a1")
	s.waitArrived(t, "b1") // another key is not held up by a's line
	s.mustWait(t, k, a2, "a", 1)
	s.mustWait(t, k, a3, "a", 1)
	if d := s.run(t, k, a1); d.Status != "EXECUTING" || d.WaitingFor != nil || d.ConcurrencyKey == nil || *d.ConcurrencyKey != "a" {
		t.Fatalf("running a1: %+v", d)
	}

	s.gate.pass("a1", true) // a1 completes: a2 (not a3) starts
	s.waitEnded(t, k, a1, "COMPLETED")
	s.waitArrived(t, "a2")
	s.mustWait(t, k, a3, "a", 1)

	s.gate.pass("a2", false) // a2 fails: a3 starts
	s.waitEnded(t, k, a2, "FAILED")
	s.waitArrived(t, "a3")

	a4 := s.trigger(t, k, wf, "a", "a4")
	a5 := s.trigger(t, k, wf, "a", "a5")
	s.mustWait(t, k, a4, "a", 1)
	if resp, body := s.do(t, k, http.MethodPost, "/v1/sdk/workflows/executions/"+a4+"/cancel", `{"reason": "not needed"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel waiting a4: %d %s", resp.StatusCode, body)
	}
	if d := s.run(t, k, a4); d.Status != "FAILED" || d.CancelRequestedAt == nil || d.WaitingFor != nil {
		t.Fatalf("cancelled a4: %+v", d)
	}
	s.mustWait(t, k, a5, "a", 1)
	s.gate.uncount("a3", "a")
	if resp, body := s.do(t, k, http.MethodPost, "/v1/sdk/workflows/executions/"+a3+"/cancel", `{}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel running a3: %d %s", resp.StatusCode, body)
	}
	s.waitArrived(t, "a5") // the cancelled a4 left the line: a5 is next
	s.gate.pass("a3", true)
	s.gate.pass("a5", true)
	s.gate.pass("b1", true)
	s.waitEnded(t, k, a5, "COMPLETED")
	s.waitEnded(t, k, b1, "COMPLETED")

	var ofA []string
	for _, id := range s.gate.arrivals() {
		if strings.HasPrefix(id, "a") {
			ofA = append(ofA, id)
		}
	}
	if !slices.Equal(ofA, []string{"a1", "a2", "a3", "a5"}) {
		t.Fatalf("a's stages ran in the order %v, want a1 a2 a3 a5", ofA)
	}
	if n := s.gate.mostInFlight("a"); n != 1 {
		t.Fatalf("%d runs of key a ran at once, limit 1", n)
	}
	adm := admissions(t, s.core.env.Store)
	for _, id := range []string{a1, a2, a3, a5, b1} {
		if adm[id] != 1 {
			t.Fatalf("run %s admitted %d times", id, adm[id])
		}
	}
	if adm[a4] != 0 {
		t.Fatal("the cancelled waiting run was admitted")
	}
}

// The line survives its scheduler: one stops with runs waiting (and one's stage ended
// meanwhile); the next instance to take the lock resumes exactly, and so does a third after
// the second stops. No run starts twice, none is forgotten, the limit holds throughout.
func TestConcurrencyQueueSurvivesSchedulerTakeover(t *testing.T) {
	s := newConcStack(t)
	first := s.scheduler(t)
	ws := s.core.env.Workspace(t, 100)
	k := s.key(t, ws)
	wf := s.workflow(t, ws, 2)
	var ids []string
	for i := 1; i <= 7; i++ {
		ids = append(ids, s.trigger(t, k, wf, "k", fmt.Sprintf("r%d", i)))
	}
	s.waitArrived(t, "r1")
	s.waitArrived(t, "r2")
	s.mustWait(t, k, ids[2], "k", 2)

	first() // the lead stops; r1's stage completes while no scheduler runs
	s.gate.pass("r1", true)
	testenv.Eventually(t, 30*time.Second, "r1's execution to complete", func() bool {
		ex, err := s.core.env.Cmds.Executions.Execution(context.Background(), run.ExecutionID(run.StageID(ids[0], "g", run.NoIteration)))
		return err == nil && ex.Status == execution.StatusCompleted
	})
	s.mustWait(t, k, ids[2], "k", 2)

	second := s.scheduler(t)
	s.scheduler(t) // a third instance waits for the lock
	s.waitEnded(t, k, ids[0], "COMPLETED")
	s.waitArrived(t, "r3")
	s.mustWait(t, k, ids[3], "k", 2)
	s.gate.pass("r2", true)
	s.waitArrived(t, "r4")

	second() // the second lead stops too: the third takes over
	s.gate.pass("r3", true)
	s.waitArrived(t, "r5")
	s.mustWait(t, k, ids[5], "k", 2)
	for i := 4; i <= 7; i++ {
		s.gate.pass(fmt.Sprintf("r%d", i), true)
		if i+2 <= 7 {
			s.waitArrived(t, fmt.Sprintf("r%d", i+2))
		}
	}
	for _, id := range ids {
		s.waitEnded(t, k, id, "COMPLETED")
	}
	got := s.gate.arrivals()
	if len(got) != 7 || !slices.Equal(slices.Sorted(slices.Values(got[:2])), []string{"r1", "r2"}) ||
		!slices.Equal(got[2:], []string{"r3", "r4", "r5", "r6", "r7"}) {
		t.Fatalf("stages ran %v, want each of r1..r7 once, in order (r1 and r2 together)", got)
	}
	if n := s.gate.mostInFlight("k"); n > 2 {
		t.Fatalf("%d runs of the key ran at once, limit 2", n)
	}
	adm := admissions(t, s.core.env.Store)
	for _, id := range ids {
		if adm[id] != 1 {
			t.Fatalf("run %s admitted %d times", id, adm[id])
		}
	}
}

// A concurrency is checked when the workflow is saved, and its key when a run is triggered:
// each bad one is a 400 naming the field.
func TestConcurrencyBadInputIs400(t *testing.T) {
	s := newConcStack(t)
	s.scheduler(t)
	ws := s.core.env.Workspace(t, 100)
	const comps = `"components": [{"id": "t", "module": "ON_API_CALLED", "position": [0, 0]}, {"id": "a", "module": "core.echo", "position": [200, 0]}],
		"edges": [{"from": "t", "to": "a"}]`
	for _, c := range []struct{ name, concurrency, field string }{
		{"limit 0", `{"key": "customer", "limit": 0}`, "concurrency.limit"},
		{"limit 1001", `{"key": "customer", "limit": 1001}`, "concurrency.limit"},
		{"no key", `{"limit": 1}`, "concurrency.key"},
		{"key does not compile", `{"key": "customer +", "limit": 1}`, "concurrency.key"},
	} {
		status, body := s.createWorkflow(t, ws, `{"name": "bad", "concurrency": `+c.concurrency+`, `+comps+`}`)
		if status != http.StatusBadRequest || !strings.Contains(string(body), c.field) {
			t.Fatalf("%s: %d %s, want 400 naming %s", c.name, status, body, c.field)
		}
	}
	status, body := s.createWorkflow(t, ws, `{"name": "typo", "concurrency": {"key": "customer", "limt": 1}, `+comps+`}`)
	if status != http.StatusBadRequest {
		t.Fatalf("a misspelt member: %d %s", status, body)
	}

	status, body = s.createWorkflow(t, ws, `{"name": "nested-key", "concurrency": {"key": "customer.id", "limit": 1}, `+comps+`}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	var wf struct{ ID string }
	_ = json.Unmarshal(body, &wf)
	k := s.key(t, ws)
	resp, out := s.do(t, k, http.MethodPost, "/v1/sdk/workflows/"+wf.ID, `{"customer": 5}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), "concurrency.key") {
		t.Fatalf("a body the key cannot be evaluated over: %d %s, want 400 naming concurrency.key", resp.StatusCode, out)
	}
	if runs := runsOf(t, s.core.env.Store, wf.ID); len(runs) != 0 {
		t.Fatalf("a refused trigger started %v", runs)
	}
	resp, out = s.do(t, k, http.MethodPost, "/v1/sdk/workflows/"+wf.ID, `{"customer": {"id": "c-1"}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a good body: %d %s", resp.StatusCode, out)
	}
}
