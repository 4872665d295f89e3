package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/debounce"
	"github.com/switchyard/switchyard/testenv"
)

// fakeClock is the injected clock of the events tests: time moves only when a test advances
// it, and a waiter (debounce.Config.After) fires once the clock passes its deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock on by d and fires the waiters it passes.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// eventStack is the service's SDK routes over commands on a fake clock, with the debounce
// reactor on the same clock.
type eventStack struct {
	*guardStack
	clock *fakeClock
	ws    string
	key   commands.APIKeyMinted
}

func newEventStack(t *testing.T) *eventStack { return newEventStackOn(t, newFakeClock()) }

// newEventStackOn is newEventStack on clock, nil for the wall clock (benchmarks).
func newEventStackOn(t testing.TB, clock *fakeClock) *eventStack {
	t.Helper()
	env := testenv.New(t)
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	reg := modules.Builtins(modules.BuiltinsConfig{})
	now, after := time.Now, time.After
	if clock != nil {
		now, after = clock.Now, clock.After
	}
	env.Cmds = commands.New(env.Store, commands.WithModules(reg), commands.WithClock(now))
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(env.Cmds.Workspaces.APIKey), Logger: log,
		RatePerSecond: 10000, Burst: 10000})
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: log})
	(&httpapi.SDKWorkflows{Cmds: env.Cmds, Queries: env.Queries, Auth: auth, Heartbeat: time.Second}).Mount(server.V1)
	(&httpapi.SDKEvents{Cmds: env.Cmds, Queries: env.Queries, Auth: auth}).Mount(server.V1)
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	testenv.Go(t, debounce.New(env.Store, env.Cmds, env.Queries, debounce.Config{Now: now, After: after,
		RetryDelay: time.Second, Logger: log}).Run)
	s := &eventStack{guardStack: &guardStack{core: testCore{env: env, log: log, reg: reg}, srv: srv}, clock: clock}
	s.ws = env.Workspace(t, 1_000_000)
	k, err := env.Cmds.Workspaces.CreateAPIKey(context.Background(), commands.CreateAPIKey{WorkspaceID: s.ws, Label: "t"})
	if err != nil {
		t.Fatal(err)
	}
	s.key = k
	return s
}

// listener creates a workflow whose ON_EVENT trigger has config and waits until the events
// index lists it.
func (s *eventStack) listener(t testing.TB, name, config string) string {
	t.Helper()
	st, err := s.core.env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: s.ws,
		Definition: workflow.Definition{Name: name,
			Components: []workflow.Component{{ID: "on", Module: workflow.ModuleOnEvent, Config: json.RawMessage(config)},
				{ID: "echo", Module: "core.echo"}},
			Edges: []workflow.Edge{{From: "on", To: "echo"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var ec workflow.EventConfig
	_ = json.Unmarshal([]byte(config), &ec)
	eventually(t, func() bool {
		ms, err := s.core.env.Queries.EventTriggersOf(context.Background(), s.ws, ec.Name)
		for _, m := range ms {
			if m.WorkflowID == st.ID {
				return true
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		return false
	})
	return st.ID
}

type sentEvent struct {
	EventID   string `json:"eventId"`
	Duplicate bool   `json:"duplicate"`
	Runs      []struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
		Debounced  bool   `json:"debounced"`
	} `json:"runs"`
}

// send POSTs an event and decodes the 200 answer.
func (s *eventStack) send(t *testing.T, body string) sentEvent {
	t.Helper()
	resp, b := s.do(t, s.key, http.MethodPost, "/v1/sdk/events", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send %s: %d %s", body, resp.StatusCode, b)
	}
	var out sentEvent
	if err := json.Unmarshal(b, &out); err != nil || out.EventID == "" {
		t.Fatalf("send answered %s", b)
	}
	return out
}

// runInput is the trigger body of run id, or nil when it has not started.
func (s *eventStack) runInput(t *testing.T, id string) json.RawMessage {
	t.Helper()
	st, err := s.core.env.Cmds.Workflows.Run(context.Background(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Input
}

// eventually polls cond until it holds, failing the test after 20 s.
func eventually(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func workflowsOf(e sentEvent) map[string]string {
	out := map[string]string{}
	for _, r := range e.Runs {
		out[r.WorkflowID] = r.RunID
	}
	return out
}

// An event starts a run of every workflow listening for its name whose filter holds, with
// the payload as the trigger body; a filter that does not hold, or another name, starts none.
func TestEventStartsTheWorkflowsWhoseFilterHolds(t *testing.T) {
	s := newEventStack(t)
	big := s.listener(t, "big orders", `{"name": "order.paid", "filter": "amount > 100 && payload.currency == 'EUR'"}`)
	all := s.listener(t, "all orders", `{"name": "order.paid"}`)
	other := s.listener(t, "refunds", `{"name": "order.refunded"}`)

	e := s.send(t, `{"name": "order.paid", "payload": {"amount": 150, "currency": "EUR"}}`)
	got := workflowsOf(e)
	if len(got) != 2 || got[big] == "" || got[all] == "" || got[other] != "" {
		t.Fatalf("amount 150 started %v, want runs of %s and %s", got, big, all)
	}
	if in := s.runInput(t, got[big]); !sameJSON(in, `{"amount":150,"currency":"EUR"}`) {
		t.Fatalf("run input %s", in)
	}
	e = s.send(t, `{"name": "order.paid", "payload": {"amount": 50, "currency": "EUR"}}`)
	if got := workflowsOf(e); len(got) != 1 || got[all] == "" {
		t.Fatalf("amount 50 started %v, want a run of %s only", got, all)
	}
	if e := s.send(t, `{"name": "order.shipped", "payload": {}}`); len(e.Runs) != 0 {
		t.Fatalf("an event nobody listens for started %v", e.Runs)
	}
}

// A key scoped to some workflows starts those of the listeners only, and is answered those.
func TestEventFromAScopedKey(t *testing.T) {
	s := newEventStack(t)
	mine := s.listener(t, "mine", `{"name": "order.paid"}`)
	theirs := s.listener(t, "theirs", `{"name": "order.paid"}`)
	k, err := s.core.env.Cmds.Workspaces.CreateAPIKey(context.Background(), commands.CreateAPIKey{WorkspaceID: s.ws, Label: "scoped",
		AllowedWorkflowIDs: []string{mine}})
	if err != nil {
		t.Fatal(err)
	}
	resp, b := s.do(t, k, http.MethodPost, "/v1/sdk/events", `{"name": "order.paid", "payload": {}}`)
	var e sentEvent
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &e) != nil {
		t.Fatalf("scoped send: %d %s", resp.StatusCode, b)
	}
	if got := workflowsOf(e); len(got) != 1 || got[mine] == "" {
		t.Fatalf("a key scoped to %s started %v", mine, got)
	}
	if n := len(runsOf(t, s.core.env.Store, theirs)); n != 0 {
		t.Fatalf("a key scoped elsewhere started %d runs of %s", n, theirs)
	}
}

// The same id sent twice answers the first's runs and starts nothing more; another id is
// another event.
func TestEventDedupByID(t *testing.T) {
	s := newEventStack(t)
	wf := s.listener(t, "orders", `{"name": "order.paid"}`)
	first := s.send(t, `{"name": "order.paid", "id": "evt-1", "payload": {"n": 1}}`)
	again := s.send(t, `{"name": "order.paid", "id": "evt-1", "payload": {"n": 1}}`)
	if !again.Duplicate || again.EventID != first.EventID || len(again.Runs) != 1 || again.Runs[0].RunID != first.Runs[0].RunID {
		t.Fatalf("second send %+v, first %+v", again, first)
	}
	if n := len(runsOf(t, s.core.env.Store, wf)); n != 1 {
		t.Fatalf("the same id twice started %d runs, want 1", n)
	}
	s.send(t, `{"name": "order.paid", "id": "evt-2", "payload": {"n": 2}}`)
	if n := len(runsOf(t, s.core.env.Store, wf)); n != 2 {
		t.Fatalf("two ids started %d runs, want 2", n)
	}
	// Past 24 hours the id is new again.
	s.clock.Advance(24*time.Hour + time.Second)
	later := s.send(t, `{"name": "order.paid", "id": "evt-1", "payload": {"n": 1}}`)
	if later.Duplicate || later.EventID == first.EventID || later.Runs[0].RunID == first.Runs[0].RunID {
		t.Fatalf("an id past the window answered %+v", later)
	}
}

// Every bad field is a 400 naming it: the event's and an ON_EVENT config's (a filter that
// does not compile among them).
func TestEventBadInputNamesTheField(t *testing.T) {
	s := newEventStack(t)
	for body, field := range map[string]string{
		`{}`:                                            "name",
		`{"name": "bad name"}`:                          "name",
		`{"name": "a", "payload": [1]}`:                 "payload",
		`{"name": "a", "payload": 3}`:                   "payload",
		`{"name": "a", "id": 7}`:                        "id",
		`{"name": "a", "unknown": 1}`:                   "unknown",
		fmt.Sprintf(`{"name": "a", "id": "%0300d"}`, 0): "id",
	} {
		resp, b := s.do(t, s.key, http.MethodPost, "/v1/sdk/events", body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), field) {
			t.Errorf("%s: %d %s, want a 400 naming %s", body, resp.StatusCode, b, field)
		}
	}
	for config, field := range map[string]string{
		`{"name": "a", "filter": "amount >"}`:                        "config.filter",
		`{"name": "a", "filter": "1 + 1"}`:                           "config.filter",
		`{"name": "a", "debounce": {"quietMs": 1000, "key": "a +"}}`: "config.debounce.key",
		`{"name": "a", "debounce": {"quietMs": 10}}`:                 "config.debounce.quietMs",
	} {
		_, err := s.core.env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: s.ws,
			Definition: workflow.Definition{Name: "bad", Components: []workflow.Component{{ID: "on", Module: workflow.ModuleOnEvent, Config: json.RawMessage(config)}}}})
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != `components[0] (component "on").`+field {
			t.Errorf("%s: got %v, want a 400 naming %s", config, err, field)
		}
	}
	// A component update is compiled as a whole definition is.
	wf := s.listener(t, "good", `{"name": "a"}`)
	for patch, field := range map[string]string{
		`{"filter": "amount >"}`:                        "config.filter",
		`{"debounce": {"quietMs": 1000, "key": "a +"}}`: "config.debounce.key",
	} {
		_, err := s.core.env.Cmds.Workflows.UpdateComponent(context.Background(), s.ws, wf, "on", workflow.ComponentPatch{Config: json.RawMessage(patch)})
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("update %s: got %v, want a 400 naming %s", patch, err, field)
		}
	}
}

// A debounced trigger starts one run per key once the key has been quiet for quietMs, with
// every payload in arrival order; a quieter key waits its own time.
func TestDebounceByQuietPeriodKeepsEveryEvent(t *testing.T) {
	s := newEventStack(t)
	wf := s.listener(t, "digest", `{"name": "comment.added", "debounce": {"key": "customer", "quietMs": 1000, "maxWaitMs": 60000, "maxItems": 10}}`)
	a1 := s.send(t, `{"name": "comment.added", "payload": {"customer": "a", "n": 1}}`)
	s.clock.Advance(400 * time.Millisecond)
	b1 := s.send(t, `{"name": "comment.added", "payload": {"customer": "b", "n": 1}}`)
	s.clock.Advance(400 * time.Millisecond)
	a2 := s.send(t, `{"name": "comment.added", "payload": {"customer": "a", "n": 2}}`)
	s.clock.Advance(400 * time.Millisecond)
	a3 := s.send(t, `{"name": "comment.added", "payload": {"customer": "a", "n": 3}}`)
	runA, runB := a1.Runs[0].RunID, b1.Runs[0].RunID
	if !a1.Runs[0].Debounced || a2.Runs[0].RunID != runA || a3.Runs[0].RunID != runA || runB == runA {
		t.Fatalf("runs answered: a %v %v %v, b %v", a1.Runs, a2.Runs, a3.Runs, b1.Runs)
	}
	if s.runInput(t, runA) != nil || s.runInput(t, runB) != nil {
		t.Fatal("a debounced run started before its key was quiet")
	}
	// Key b has been quiet for 1 s at 1.4 s (its only event at 0.4 s); key a only at 2.2 s.
	s.clock.Advance(200 * time.Millisecond)
	eventually(t, func() bool { return s.runInput(t, runB) != nil })
	if got := s.runInput(t, runB); !sameJSON(got, `{"events":[{"customer":"b","n":1}]}`) {
		t.Fatalf("run of key b: %s", got)
	}
	if s.runInput(t, runA) != nil {
		t.Fatal("key a's run started while a was not quiet")
	}
	s.clock.Advance(800 * time.Millisecond)
	eventually(t, func() bool { return s.runInput(t, runA) != nil })
	if got := s.runInput(t, runA); !sameJSON(got, `{"events":[{"customer":"a","n":1},{"customer":"a","n":2},{"customer":"a","n":3}]}`) {
		t.Fatalf("run of key a: %s", got)
	}
	// After the flush, the key's next event opens a new window with a run of its own.
	a4 := s.send(t, `{"name": "comment.added", "payload": {"customer": "a", "n": 4}}`)
	if a4.Runs[0].RunID == runA {
		t.Fatal("an event after the flush joined the flushed window")
	}
	if n := len(runsOf(t, s.core.env.Store, wf)); n != 2 {
		t.Fatalf("%d runs started, want 2", n)
	}
}

// A key that never goes quiet starts its run maxWaitMs after its first event.
func TestDebounceByMaxWait(t *testing.T) {
	s := newEventStack(t)
	s.listener(t, "busy", `{"name": "tick", "debounce": {"quietMs": 1000, "maxWaitMs": 3000}}`)
	var run string
	for i := range 4 { // at 0, 0.8, 1.6, 2.4 s: never quiet for 1 s
		e := s.send(t, fmt.Sprintf(`{"name": "tick", "payload": {"i": %d}}`, i))
		run = e.Runs[0].RunID
		s.clock.Advance(800 * time.Millisecond)
	}
	// 3.2 s now: past the max wait (3 s), short of the quiet period (3.4 s).
	eventually(t, func() bool { return s.runInput(t, run) != nil })
	if got := s.runInput(t, run); !sameJSON(got, `{"events":[{"i":0},{"i":1},{"i":2},{"i":3}]}`) {
		t.Fatalf("run input %s", got)
	}
}

// A key that reaches maxItems starts its run at once, without waiting on the clock; the next
// event opens the next window.
func TestDebounceByMaxItems(t *testing.T) {
	s := newEventStack(t)
	wf := s.listener(t, "batch", `{"name": "row", "debounce": {"quietMs": 60000, "maxItems": 3}}`)
	var runs []string
	for i := range 4 {
		e := s.send(t, fmt.Sprintf(`{"name": "row", "id": "row-%d", "payload": {"i": %d}}`, i, i))
		runs = append(runs, e.Runs[0].RunID)
	}
	if runs[0] != runs[2] || runs[3] == runs[0] {
		t.Fatalf("runs %v: want the first three in one window, the fourth in the next", runs)
	}
	if got := s.runInput(t, runs[0]); !sameJSON(got, `{"events":[{"i":0},{"i":1},{"i":2}]}`) {
		t.Fatalf("the full window's run: %q", got)
	}
	// The same event again is not gathered twice.
	s.send(t, `{"name": "row", "id": "row-3", "payload": {"i": 3}}`)
	s.clock.Advance(time.Minute)
	eventually(t, func() bool { return s.runInput(t, runs[3]) != nil })
	if got := s.runInput(t, runs[3]); !sameJSON(got, `{"events":[{"i":3}]}`) {
		t.Fatalf("the second window's run: %s", got)
	}
	if n := len(runsOf(t, s.core.env.Store, wf)); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

// sameJSON reports whether raw is the JSON value want (the store keeps JSON as jsonb: its
// spacing is not the sender's).
func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// An event whose workflow the balance cannot cover is a 402 that records the event: sent again
// after a top-up, the same id starts the run, once.
func TestEventRefusedForCreditsStartsWhenSentAgain(t *testing.T) {
	s := newEventStack(t)
	ctx := context.Background()
	s.ws = s.core.env.Workspace(t, 0)
	k, err := s.core.env.Cmds.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: s.ws, Label: "poor"})
	if err != nil {
		t.Fatal(err)
	}
	s.key = k
	wf := s.listener(t, "paid", `{"name": "order.paid"}`)
	body := `{"name": "order.paid", "id": "o-7", "payload": {"n": 7}}`
	resp, b := s.do(t, s.key, http.MethodPost, "/v1/sdk/events", body)
	if resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("without credits: %d %s, want 402", resp.StatusCode, b)
	}
	if n := len(runsOf(t, s.core.env.Store, wf)); n != 0 {
		t.Fatalf("%d runs started without credits", n)
	}
	if _, err := s.core.env.Cmds.Billing.TopUp(ctx, s.ws, billing.FromWhole(100), ""); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(time.Minute) // past the balance this process remembers
	e := s.send(t, body)
	if !e.Duplicate || len(e.Runs) != 1 {
		t.Fatalf("sent again after a top-up: %+v", e)
	}
	again := s.send(t, body)
	if len(again.Runs) != 1 || again.Runs[0].RunID != e.Runs[0].RunID {
		t.Fatalf("a third sending answered %+v, the second %+v", again, e)
	}
	if n := len(runsOf(t, s.core.env.Store, wf)); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}
