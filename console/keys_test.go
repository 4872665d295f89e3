package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestAPIKeySecretShownOnce: creating a key redirects to the page that shows its secret, once;
// reloading that page creates no second key and shows the secret no more.
func TestAPIKeySecretShownOnce(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	owner := s.client(t, s.owner)
	keys := "/workspaces/" + s.ws + "/api-keys"
	st, body := s.post(t, owner, keys, url.Values{"action": {"create"}, "label": {"ci deploys"}, "expires": {"2099-01-01"}})
	if st != http.StatusSeeOther {
		t.Fatalf("create a key: %d, want a redirect (post/redirect/get)\n%s", st, body)
	}
	if strings.Contains(body, "minted-secret") {
		t.Fatal("the create's answer carries the secret")
	}
	loc := s.location(t, owner, keys, url.Values{"action": {"create"}, "label": {"second"}})
	st, body = s.get(t, owner, loc)
	secret := regexp.MustCompile(`id="minted-secret">([^<]+)<`).FindStringSubmatch(body)
	if st != http.StatusOK || secret == nil || !strings.Contains(body, "Copy the secret now") {
		t.Fatalf("the page after the create: %d\n%s", st, body)
	}
	// Reload: the same address again, once the read model holds both keys (the count below is
	// of keys minted, not of how far the projector has come).
	s.env.CaughtUp(t, "apikeys")
	st, body = s.get(t, owner, loc)
	if st != http.StatusOK || strings.Contains(body, secret[1]) || strings.Contains(body, "minted-secret") ||
		!strings.Contains(body, "shown once and is not shown again") {
		t.Fatalf("the reloaded page: %d\n%s", st, body)
	}
	if n := strings.Count(body, `data-key-id=`); n != 2 {
		t.Fatalf("after a reload the list has %d keys, want the 2 created", n)
	}
	// Another person of the workspace cannot read the secret from the page either.
	if _, body := s.get(t, s.client(t, s.member), loc); strings.Contains(body, secret[1]) {
		t.Fatal("a member sees the secret")
	}
}

// TestAPIKeyRevokeConfirmedAndShownAtOnce: revoking asks first (harder for the last active
// key) and the list says "revoked" in the answer, before the read model has caught up.
func TestAPIKeyRevokeConfirmedAndShownAtOnce(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	owner := s.client(t, s.owner)
	keys := "/workspaces/" + s.ws + "/api-keys"
	first := s.keyID(t, s.location(t, owner, keys, url.Values{"action": {"create"}, "label": {"first"}}))
	second := s.keyID(t, s.location(t, owner, keys, url.Values{"action": {"create"}, "label": {"second"}}))
	s.env.CaughtUp(t, "apikeys")

	_, body := s.get(t, owner, keys)
	if strings.Contains(body, `value="revoke"`) || !strings.Contains(body, `href="?revoke=`+first+`"`) {
		t.Fatalf("the list revokes without asking:\n%s", body)
	}
	_, body = s.get(t, owner, keys+"?revoke="+first)
	if !strings.Contains(body, `id="confirm-revoke"`) || !strings.Contains(body, "Revoke the key “first”?") || strings.Contains(body, "last-key-warning") {
		t.Fatalf("the confirmation of one of two keys:\n%s", body)
	}
	s.revokeNow(t, owner, keys, first)
	s.env.CaughtUp(t, "apikeys") // the count of active keys is the read model's
	_, body = s.get(t, owner, keys+"?revoke="+second)
	if !strings.Contains(body, `id="last-key-warning"`) {
		t.Fatalf("no stronger warning for the last active key:\n%s", body)
	}
	s.revokeNow(t, owner, keys, second)
}

// revokeNow revokes key id through the confirmation's form with the read model held back, and
// checks the page it leads to says revoked.
func (s *stack) revokeNow(t *testing.T, c *http.Client, keys, id string) {
	t.Helper()
	defer s.holdTable(t, "api_keys")()
	loc := s.location(t, c, keys, url.Values{"action": {"revoke"}, "key_id": {id}})
	_, body := s.get(t, c, loc)
	row := regexp.MustCompile(`data-key-id="` + id + `">.*?class="key-state">(.*?)</td>`).FindStringSubmatch(strings.ReplaceAll(body, "\n", " "))
	if row == nil || !strings.Contains(row[1], "revoked") || !strings.Contains(body, "Key revoked") {
		t.Fatalf("after revoking %s the list says %v\n%s", id, row, body)
	}
	if st, _ := s.get(t, c, loc); st != http.StatusOK {
		t.Fatalf("reloading after the revoke: %d", st)
	}
}

// holdTable keeps a read model's table from changing until the returned func is called: its
// projector's next write waits for the lock, while reads go on.
func (s *stack) holdTable(t *testing.T, table string) func() {
	t.Helper()
	ctx := context.Background()
	tx, err := s.env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(ctx) }
}

// location posts a form that must redirect and returns where to.
func (s *stack) location(t *testing.T, c *http.Client, path string, form url.Values) string {
	t.Helper()
	if form.Get("csrf_token") == "" {
		form.Set("csrf_token", s.csrfFrom(t, c, "/logout"))
	}
	resp, err := c.PostForm(s.srv.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST %s %v: %d, want 303\n%s", path, form, resp.StatusCode, body)
	}
	return resp.Header.Get("Location")
}

func (s *stack) keyID(t *testing.T, loc string) string {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil || u.Query().Get("created") == "" {
		t.Fatalf("redirect %q names no key", loc)
	}
	return u.Query().Get("created")
}
