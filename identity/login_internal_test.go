package identity

import (
	"context"
	"testing"
	"time"
)

func TestSafeReturnKeepsRedirectsOnSite(t *testing.T) {
	const home = "/"
	for _, to := range []string{
		"", "evil.example", "//evil.example/", "///evil.example/", "/\\evil.example/", "\\\\evil.example",
		"/\t/evil.example/", "/\n/evil.example/", "/\r/evil.example/", "\t//evil.example/", "/\x00/evil.example",
		"/\x7f/evil.example", "/ /evil.example", " /evil.example", "https://evil.example/", "http:evil.example",
		"javascript:alert(1)", "/%5C/evil.example", "/\\/evil.example", "/.\\evil.example", "/a\\b",
		"/\u3000/evil.example", "/\u2028/evil.example", "/\ufeff/evil.example", "/%2F/evil.example", "/%2f%2fevil.example",
		"/%09/evil.example", "//@evil.example", "/x?\x00", "\xff/x",
	} {
		if got := safeReturn(to); got != home {
			t.Errorf("safeReturn(%q) = %q, want %q", to, got, home)
		}
	}
	for _, to := range []string{
		"/developer/apps", "/oauth/authorize?client_id=a&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcb&state=x",
		"/workspaces/ws-1/runs?page=2#top", "/a/b/",
	} {
		if got := safeReturn(to); got != to {
			t.Errorf("safeReturn(%q) = %q, want it kept", to, got)
		}
	}
}

func TestThrottleReservesAttemptsBeforeTheCheck(t *testing.T) {
	now := time.Now()
	th := newThrottle(ThrottleConfig{PerAccount: 5, PerClientAddr: 100}, func() time.Time { return now })
	var settle []func(attemptResult)
	for i := range 5 {
		s, wait := th.attempt("a@example.com", "10.0.0.1")
		if wait > 0 {
			t.Fatalf("attempt %d throttled", i)
		}
		settle = append(settle, s)
	}
	// Five checks are in flight and none has finished: a sixth must wait.
	if _, wait := th.attempt("a@example.com", "10.0.0.2"); wait <= 0 {
		t.Fatal("a sixth concurrent attempt was allowed")
	}
	// An attempt that ended without a verdict (an error, an overload) gives its slot back.
	settle[0](attemptAborted)
	s, wait := th.attempt("a@example.com", "10.0.0.2")
	if wait > 0 {
		t.Fatal("an aborted attempt kept its slot")
	}
	// A success clears the account's failures.
	s(attemptSucceeded)
	for _, f := range settle[1:] {
		f(attemptFailed)
	}
	if _, wait := th.attempt("a@example.com", "10.0.0.1"); wait > 0 {
		t.Fatal("throttled after a success")
	}
}

func TestPasswordGateBoundsConcurrentChecks(t *testing.T) {
	g := newGate(2, 20*time.Millisecond)
	ctx := context.Background()
	for i := range 2 {
		if !g.acquire(ctx) {
			t.Fatalf("check %d of the first two must get a slot", i+1)
		}
	}
	if g.acquire(ctx) {
		t.Fatal("a third concurrent check got a slot")
	}
	g.release()
	if !g.acquire(ctx) {
		t.Fatal("a freed slot was not handed out")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if g.acquire(cctx) {
		t.Fatal("a cancelled request got a slot")
	}
}

func TestSignInAnswersBusyWhenEveryCheckSlotIsTaken(t *testing.T) {
	p := &Provider{throttle: newThrottle(ThrottleConfig{}, time.Now), checks: newGate(1, time.Millisecond)}
	p.checks.acquire(context.Background())
	_, wait, err := p.signIn(context.Background(), "a@example.com", "pw", "10.0.0.1")
	if err != errBusy || wait <= 0 {
		t.Fatalf("signIn with no free slot: wait %v, err %v; want errBusy with a wait", wait, err)
	}
	// The refused attempt did not count against the account.
	for i := range 5 {
		if _, w := p.throttle.attempt("a@example.com", "10.0.0.1"); w > 0 {
			t.Fatalf("attempt %d throttled: the busy answer used a slot", i)
		}
	}
}
