package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestReplayedSubmitsAreRefusedAcrossServeProcesses sends each signed submit several times at
// once, to two serve processes on one database: the submit takes its signature in the commit
// that records it (docs/executions.md, "Replays"), so exactly one copy is accepted, the others
// are answered 401 invalid signature, and each accepted call is run and charged once. A copy
// sent after the first was answered is refused too, and so is the replay of a submit that was
// refused for want of credits, even once credits would cover it.
//
// The calls run first and take their signatures in their one commit, with a cache window too
// (which that commit opens); the copies then race on the claim and on the window alike.
func TestReplayedSubmitsAreRefusedAcrossServeProcesses(t *testing.T) {
	t.Run("run first", func(t *testing.T) { testReplayedSubmits(t, "SWITCHYARD_CACHE_WINDOW=0") })
	t.Run("cache window", func(t *testing.T) { testReplayedSubmits(t, "SWITCHYARD_CACHE_WINDOW=10m") })
}

func testReplayedSubmits(t *testing.T, window string) {
	const n, copies = 200, 3
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=100000", "SWITCHYARD_RATE_BURST=100000", window)
	second, s2 := svc.startSecond(t)
	callers := []*rawCaller{svc.caller(t, svc.key), newRawCaller(t, second.url(""), svc.key)}
	accepted := make([]int, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		path, body, stamp, sig := signedSubmit(callers[0], i, `{"module":"core.echo","input":{"i":%d},"config":{}}`)
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := callers[(i+c)%2].sendSigned(http.MethodPost, path, body, stamp, sig)
				switch r.status {
				case http.StatusOK:
					mu.Lock()
					accepted[i]++
					mu.Unlock()
				case http.StatusUnauthorized:
					wantErrorBody(t, r, http.StatusUnauthorized, "invalid signature")
				default:
					t.Errorf("copy %d of submit %d: status %d: %s", c, i, r.status, r.body)
				}
			}()
		}
	}
	wg.Wait()
	for i, a := range accepted {
		if a != 1 {
			t.Fatalf("submit %d was accepted %d times of %d copies, want once", i, a, copies)
		}
	}
	path, body, stamp, sig := signedSubmit(callers[0], n, `{"module":"core.echo","input":{"i":%d},"config":{}}`)
	mustStatus(t, callers[1].sendSigned(http.MethodPost, path, body, stamp, sig), http.StatusOK, "a last submit")
	for _, c := range callers {
		wantErrorBody(t, c.sendSigned(http.MethodPost, path, body, stamp, sig), http.StatusUnauthorized, "invalid signature")
	}

	// A submit refused for want of credits used its signature all the same: replayed once
	// credits would cover it, it is still refused.
	var broke struct {
		ID string `json:"workspaceId"`
	}
	svc.cli.okJSON(&broke, "admin", "workspace", "create", "--name", "Broke", "--owner", "owner@example.com", "--json")
	poor := newRawCaller(t, svc.cli.url(""), svc.newKey(t, broke.ID))
	path, body, stamp, sig = signedSubmit(poor, n+1, `{"module":"core.echo","input":{"i":%d},"config":{}}`)
	mustStatus(t, poor.sendSigned(http.MethodPost, path, body, stamp, sig), http.StatusPaymentRequired, "a submit with no credits")
	svc.cli.ok("admin", "credits", "topup", "--workspace", broke.ID, "--amount", "10")
	poorThere := newRawCaller(t, second.url(""), poor.key)
	wantErrorBody(t, poorThere.sendSigned(http.MethodPost, path, body, stamp, sig), http.StatusUnauthorized, "invalid signature")
	s2.stop(t, 30*time.Second)
	svc.srv.stop(t, 30*time.Second)
	if total := auditTotal(t, svc.cli, svc.key.WorkspaceID); total != 1000-(n+1) {
		t.Fatalf("balance after %d accepted calls of one credit = %v, want %d", n+1, total, 1000-(n+1))
	}
	if total := auditTotal(t, svc.cli, broke.ID); total != 10 {
		t.Fatalf("balance of the workspace whose refused call was replayed = %v, want the 10 topped up", total)
	}
}

// signedSubmit signs a submit of format (with i in it) once, for the test to send as often as
// it likes: the path, body, timestamp and signature.
func signedSubmit(c *rawCaller, i int, format string) (string, []byte, string, string) {
	return signedSubmitBody(c, i, fmt.Sprintf(format, i))
}

func signedSubmitBody(c *rawCaller, i int, body string) (string, []byte, string, string) {
	path := "/v1/sdk/components?replay=" + strconv.Itoa(i)
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	msg := http.MethodPost + "|" + path + "|" + stamp + "|" + body
	return path, []byte(body), stamp, base64.StdEncoding.EncodeToString(ed25519.Sign(c.priv, []byte(msg)))
}
