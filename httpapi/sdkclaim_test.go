package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/httpapi"
)

// ownedGuard is an OwnedReplayGuard in memory that counts its calls.
type ownedGuard struct {
	mu     sync.Mutex
	owners map[[32]byte]string
	seen   int // calls of Seen
	taken  int // calls of Take
}

func (g *ownedGuard) Seen(ctx context.Context, sig []byte, until time.Time) (bool, error) {
	g.mu.Lock()
	g.seen++
	g.mu.Unlock()
	return g.take(sig, "Seen"), nil
}

func (g *ownedGuard) Take(_ context.Context, sig, owner []byte, _ time.Time) (bool, error) {
	g.mu.Lock()
	g.taken++
	g.mu.Unlock()
	return g.take(sig, string(owner)), nil
}

func (g *ownedGuard) take(sig []byte, owner string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := sha256.Sum256(sig)
	if o, ok := g.owners[k]; ok {
		return o != owner
	}
	g.owners[k] = owner
	return false
}

func (g *ownedGuard) calls() (seen, taken int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen, g.taken
}

// A submit run first leaves its signature to the commit that records it: the guard is not
// asked at all. A copy sent again is refused by the process that saw it, before it spends a
// token; a submit refused before any commit takes its signature all the same, after its
// handler; other POST routes claim theirs first, as before; and so does every route when
// ClaimsInCommits is off.
func TestSubmitsLeaveTheirSignatureToTheirCommit(t *testing.T) {
	guard := &ownedGuard{owners: map[[32]byte]string{}}
	s := newGuardStack(t, httpapi.SDKAuthConfig{Replay: guard, ClaimsInCommits: true, RatePerSecond: 0.001, Burst: 6})
	ws := s.core.env.Workspace(t, 100)
	key := s.key(t, ws)

	req := s.request(t, key, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{},"config":{}}`)
	replay := req.Clone(context.Background())
	resp, body := sendAgain(t, req, `{"module":"core.echo","input":{},"config":{}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	if seen, taken := guard.calls(); seen != 0 || taken != 0 {
		t.Fatalf("the guard was asked %d times by Seen and %d by Take for a submit its commit claimed, want none", seen, taken)
	}
	left := resp.Header.Get("RateLimit-Remaining")
	resp, body = sendAgain(t, replay, `{"module":"core.echo","input":{},"config":{}}`)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the same signed submit again: %d %s, want 401", resp.StatusCode, body)
	}
	resp, _ = s.do(t, key, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{},"config":{"x":1}}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("an invalid submit: %d, want 400", resp.StatusCode)
	}
	if got := resp.Header.Get("RateLimit-Remaining"); left != "4" || got != "2" {
		t.Fatalf("tokens left %s after the submit and %s after the invalid one, want 4 and 2: the replay spent none", left, got)
	}
	if seen, taken := guard.calls(); seen != 0 || taken != 1 {
		t.Fatalf("after a refused submit the guard was asked %d times by Seen and %d by Take, want 0 and 1", seen, taken)
	}
	submit := func() int {
		resp, _ := s.do(t, key, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{},"config":{}}`)
		return resp.StatusCode
	}
	if last, over := submit(), submit(); last != http.StatusOK || over != http.StatusTooManyRequests {
		t.Fatalf("the submit of the last two tokens: %d, the one after: %d; want 200 and 429", last, over)
	}
	if seen, taken := guard.calls(); seen != 0 || taken != 2 {
		t.Fatalf("after a submit refused 429 the guard was asked %d times by Seen and %d by Take, want 0 and 2", seen, taken)
	}
	resp, _ = s.do(t, key, http.MethodPost, "/v1/sdk/components/executions/00000000-0000-0000-0000-000000000000/replay-callback", ``)
	if seen, _ := guard.calls(); resp.StatusCode != http.StatusTooManyRequests || seen != 1 {
		t.Fatalf("another POST route: %d, Seen called %d times; want 429 (no tokens left) and once", resp.StatusCode, seen)
	}

	off := &ownedGuard{owners: map[[32]byte]string{}}
	s = newGuardStack(t, httpapi.SDKAuthConfig{Replay: off})
	key = s.key(t, s.core.env.Workspace(t, 100))
	if resp, body := s.do(t, key, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{},"config":{}}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("submit with claims in commits off: %d %s", resp.StatusCode, body)
	}
	if seen, taken := off.calls(); seen != 1 || taken != 0 {
		t.Fatalf("with claims in commits off the guard was asked %d times by Seen and %d by Take, want 1 and 0", seen, taken)
	}
}

// sendAgain sends req with body again (a clone's body is the original's, read already).
func sendAgain(t *testing.T, req *http.Request, body string) (*http.Response, []byte) {
	t.Helper()
	req.Body = io.NopCloser(strings.NewReader(body))
	return send(t, req)
}

// A trigger of one run leaves its signature to the run's commit, as a submit does: the guard
// is not asked. Sent again to another instance, which has not seen it, the copy is refused by
// that commit's claim, and no second run is written. A trigger of several runs, or with an
// Idempotency-Key, commits before its runs (the key's binding, the first run): it takes its
// signature first, and its copy is refused all the same.
func TestTriggersLeaveTheirSignatureToTheirCommit(t *testing.T) {
	guard := &ownedGuard{owners: map[[32]byte]string{}}
	opts := httpapi.SDKAuthConfig{Replay: guard, ClaimsInCommits: true}
	s := newGuardStack(t, opts)
	other := mountGuardStack(t, s.core, opts)
	ws := s.core.env.Workspace(t, 100)
	key := s.key(t, ws)
	one := slowWorkflow(t, s, ws, "one trigger")
	two, err := s.core.env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws,
		Definition: workflow.Definition{Name: "two triggers",
			Components: []workflow.Component{{ID: "api", Module: workflow.ModuleTrigger}, {ID: "hook", Module: workflow.ModuleTrigger},
				{ID: "work", Module: "core.delay", Config: json.RawMessage(`{"ms":10000}`)}},
			Edges: []workflow.Edge{{From: "api", To: "work"}, {From: "hook", To: "work"}}}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, workflow, idempotencyKey string
		// runs a trigger starts; Takes of the guard so far: the trigger's own and its copy's
		// when the trigger takes its signature before committing, none when its commit does
		runs, taken int
	}{
		{"one run", one, "", 1, 0},
		{"two runs", two.ID, "", 2, 2},
		{"an Idempotency-Key", one, "k-1", 1, 4},
	}
	for _, c := range cases {
		before := countTriggered(t, s)
		req := s.request(t, key, http.MethodPost, "/v1/sdk/workflows/"+c.workflow, `{"n":1}`)
		if c.idempotencyKey != "" {
			req.Header.Set("Idempotency-Key", c.idempotencyKey)
		}
		replay := req.Clone(context.Background())
		replay.URL.Host = strings.TrimPrefix(other.srv.URL, "http://")
		if resp, body := sendAgain(t, req, `{"n":1}`); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: trigger: %d %s", c.name, resp.StatusCode, body)
		}
		if resp, body := sendAgain(t, replay, `{"n":1}`); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: the same signed trigger sent to another instance: %d %s, want 401", c.name, resp.StatusCode, body)
		}
		if got := countTriggered(t, s) - before; got != c.runs {
			t.Fatalf("%s: %d runs written by a trigger and its replay, want %d", c.name, got, c.runs)
		}
		if seen, taken := guard.calls(); seen != 0 || taken != c.taken {
			t.Fatalf("%s: the guard was asked %d times by Seen and %d by Take, want 0 and %d", c.name, seen, taken, c.taken)
		}
	}
}

// countTriggered counts the runs in the log.
func countTriggered(t *testing.T, s *guardStack) int {
	t.Helper()
	var n int
	if err := s.core.env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE type = 'RunTriggered'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
