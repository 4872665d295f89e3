package httpapi_test

import (
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

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
