package console_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/commands"
)

var hookURLRE = regexp.MustCompile(`id="hook-url">([^<]+)</pre>`)
var hookSecretRE = regexp.MustCompile(`id="hook-secret">([^<]+)</pre>`)

// The workflow page lists its ON_WEBHOOK components' hooks by URL prefix; an owner rotates
// one, sees the new URL and secret once, and a delivery signed with them starts a run, while
// the old URL is refused. A member sees no rotate button and is refused the form.
func TestWorkflowPageRotatesAHook(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	ctx := context.Background()
	if _, err := s.env.Cmds.Billing.TopUp(ctx, s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	wf := s.workflow(t, `{"name": "Pushed", "components": [
		{"id": "push", "name": "On push", "module": "ON_WEBHOOK", "config": {"scheme": "github"}, "position": [0, 0]}]}`).ID
	issued, err := s.env.Cmds.Hooks.IssueHooks(ctx, s.ws, wf)
	if err != nil || len(issued) != 1 {
		t.Fatalf("issue: %v %v", issued, err)
	}
	page := "/workspaces/" + s.ws + "/workflows/" + wf
	owner := s.client(t, s.owner)
	_, body := s.get(t, owner, page)
	hookID, _ := commands.HookKey(issued[0].Token)
	if !strings.Contains(body, `id="hooks"`) || !strings.Contains(body, "/hooks/whk_"+hookID+"_…") || strings.Contains(body, issued[0].Token) {
		t.Fatalf("the workflow page should list the hook by its prefix only\n%s", body)
	}
	loc := s.location(t, owner, page+"/hooks/push/rotate", url.Values{})
	if !strings.HasPrefix(loc, page+"?rotated=push") {
		t.Fatalf("rotate redirected to %s", loc)
	}
	_, body = s.get(t, owner, loc)
	u, sec := hookURLRE.FindStringSubmatch(body), hookSecretRE.FindStringSubmatch(body)
	if u == nil || sec == nil {
		t.Fatalf("the page after rotation shows no URL and secret\n%s", body)
	}
	newURL, secret := html.UnescapeString(u[1]), html.UnescapeString(sec[1])
	if newURL == issued[0].URL {
		t.Fatal("rotation kept the URL")
	}
	if _, again := s.get(t, owner, loc); strings.Contains(again, secret) {
		t.Fatal("the secret was shown twice")
	}
	payload := []byte(`{"ref": "main"}`)
	deliver := func(path, key string) int {
		m := hmac.New(sha256.New, []byte(key))
		m.Write(payload)
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL+path, bytes.NewReader(payload))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		req.Header.Set("X-GitHub-Delivery", "console-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := deliver(issued[0].URL, issued[0].Secret); st != http.StatusNotFound {
		t.Fatalf("the old URL: %d, want 404", st)
	}
	if st := deliver(newURL, secret); st != http.StatusAccepted {
		t.Fatalf("the new URL: %d, want 202", st)
	}
	member := s.client(t, s.member)
	if _, body := s.get(t, member, page); strings.Contains(body, "rotate-hook") || !strings.Contains(body, `id="hooks"`) {
		t.Fatal("a member should see the hooks without the rotate button")
	}
	if st, _ := s.post(t, member, page+"/hooks/push/rotate", url.Values{}); st != http.StatusForbidden {
		t.Fatalf("a member's rotation: %d, want 403", st)
	}
}
