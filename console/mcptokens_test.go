package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMCPTokenShownOnce: creating a token redirects to the page that shows it, once; reloading
// that page mints no second token and shows the token no more.
func TestMCPTokenShownOnce(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	owner := s.client(t, s.owner)
	tokens := "/workspaces/" + s.ws + "/mcp-tokens"
	st, body := s.post(t, owner, tokens, url.Values{"action": {"mint"}, "label": {"assistant"}, "expires": {"2099-01-01"}})
	if st != http.StatusSeeOther {
		t.Fatalf("create a token: %d, want a redirect (post/redirect/get)\n%s", st, body)
	}
	if strings.Contains(body, "minted-token") {
		t.Fatal("the create's answer carries the token")
	}
	loc := s.location(t, owner, tokens, url.Values{"action": {"mint"}, "label": {"second"}})
	// Another admin of the workspace, given a copy of the owner's sealed cookie, cannot open it.
	admin := s.person(t, "admin")
	if err := s.env.Cmds.Workspaces.AddMember(context.Background(), s.ws, admin.Email, "admin"); err != nil {
		t.Fatal(err)
	}
	other := s.client(t, admin)
	u, _ := url.Parse(s.srv.URL + tokens)
	held := slices.DeleteFunc(owner.Jar.Cookies(u), func(c *http.Cookie) bool { return c.Name != "sy_minted_mcp" })
	if len(held) != 1 {
		t.Fatal("the create's answer holds no token cookie")
	}
	other.Jar.SetCookies(u, held)
	if st, body := s.get(t, other, loc); st != http.StatusOK || strings.Contains(body, "minted-token") {
		t.Fatalf("another admin with the owner's cookie: %d\n%s", st, body)
	}
	st, body = s.get(t, owner, loc)
	token := regexp.MustCompile(`id="minted-token">([^<]+)<`).FindStringSubmatch(body)
	if st != http.StatusOK || token == nil || !strings.Contains(body, "Copy it now") {
		t.Fatalf("the page after the create: %d\n%s", st, body)
	}
	// Reload: the same address again.
	st, body = s.get(t, owner, loc)
	if st != http.StatusOK || strings.Contains(body, token[1]) || strings.Contains(body, "minted-token") ||
		!strings.Contains(body, "shown once and is not shown again") {
		t.Fatalf("the reloaded page: %d\n%s", st, body)
	}
	s.env.CaughtUp(t, "mcptokens")
	if _, body = s.get(t, owner, tokens); strings.Count(body, `data-token-id=`) != 2 {
		t.Fatalf("after a reload the list has %d tokens, want the 2 created\n%s", strings.Count(body, `data-token-id=`), body)
	}
}

// TestMCPTokenRevokeConfirmedAndShownAtOnce: revoking a token asks first, and the list says
// "revoked" in the answer, before the read model has caught up.
func TestMCPTokenRevokeConfirmedAndShownAtOnce(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	owner := s.client(t, s.owner)
	tokens := "/workspaces/" + s.ws + "/mcp-tokens"
	loc := s.location(t, owner, tokens, url.Values{"action": {"mint"}, "label": {"assistant"}})
	u, err := url.Parse(loc)
	if err != nil || u.Query().Get("created") == "" {
		t.Fatalf("redirect %q names no token", loc)
	}
	id := u.Query().Get("created")
	s.env.CaughtUp(t, "mcptokens")

	_, body := s.get(t, owner, tokens)
	if strings.Contains(body, `value="revoke"`) || !strings.Contains(body, `href="?revoke=`+id+`"`) {
		t.Fatalf("the list revokes without asking:\n%s", body)
	}
	_, body = s.get(t, owner, tokens+"?revoke="+id)
	if !strings.Contains(body, `id="confirm-revoke"`) || !strings.Contains(body, "Revoke the token “assistant”?") {
		t.Fatalf("no confirmation:\n%s", body)
	}
	release := s.holdTable(t, "mcp_tokens")
	defer release()
	loc = s.location(t, owner, tokens, url.Values{"action": {"revoke"}, "token_id": {id}})
	_, body = s.get(t, owner, loc)
	row := regexp.MustCompile(`data-token-id="` + id + `">.*?class="token-state">(.*?)</td>`).FindStringSubmatch(strings.ReplaceAll(body, "\n", " "))
	if row == nil || !strings.Contains(row[1], "revoked") || !strings.Contains(body, "Token revoked") {
		t.Fatalf("after revoking, the list says %v\n%s", row, body)
	}
	if st, _ := s.get(t, owner, loc); st != http.StatusOK {
		t.Fatalf("reloading after the revoke: %d", st)
	}
	release()
	// A revoked token asks for nothing more.
	s.env.CaughtUp(t, "mcptokens")
	if _, body = s.get(t, owner, tokens+"?revoke="+id); strings.Contains(body, `id="confirm-revoke"`) {
		t.Fatalf("a revoked token offers to be revoked again:\n%s", body)
	}
}
