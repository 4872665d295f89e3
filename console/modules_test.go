package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestModulesPage registers, edits and deletes workspace modules from the console with forms
// as a browser without JavaScript posts them (CSRF, post/redirect/get): the secret is never
// shown, refusals say which field, allowPrivate is the owners', and members see nothing.
func TestModulesPage(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	admin := s.person(t, "admin")
	if err := s.env.Cmds.Workspaces.AddMember(context.Background(), s.ws, admin.Email, "admin"); err != nil {
		t.Fatal(err)
	}
	owner, adminC, member := s.client(t, s.owner), s.client(t, admin), s.client(t, s.member)
	page := "/workspaces/" + s.ws + "/modules"
	form := func(kv ...string) url.Values {
		v := url.Values{"action": {"register"}, "price": {"1"}, "timeout_ms": {"60000"}, "transport": {"worker"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}

	if st, body := s.get(t, owner, page); st != http.StatusOK || !strings.Contains(body, `id="nav-modules"`) || !strings.Contains(body, "No modules yet") {
		t.Fatalf("the empty page: %d\n%s", st, body)
	}
	if st, body := s.get(t, member, page); st != http.StatusForbidden || strings.Contains(body, `id="register-module"`) {
		t.Fatalf("the page as a member: %d", st)
	}

	loc := s.location(t, owner, page, form("name", "acme.resize", "description", "Resizes images", "price", "2.5",
		"input_schema", `{"type": "object", "required": ["n"]}`))
	if u, _ := url.Parse(loc); u.Query().Get("registered") != "acme.resize" {
		t.Fatalf("register redirects to %q", loc)
	}
	// Shown at once, before the read model has caught up.
	release := s.holdTable(t, "modules")
	_, body := s.get(t, owner, loc)
	release()
	if !strings.Contains(body, `data-module="acme.resize"`) || !strings.Contains(body, "acme.resize registered") || !strings.Contains(body, "2.5") {
		t.Fatalf("after registering:\n%s", body)
	}

	s.location(t, owner, page, form("name", "acme.local", "transport", "http", "url", "http://10.0.0.8/task",
		"secret", "console-s3cret", "allow_private", "on"))
	st, body := s.get(t, owner, page+"/acme.local")
	if st != http.StatusOK || strings.Contains(body, "console-s3cret") || !strings.Contains(body, "a secret is set") || !strings.Contains(body, "http://10.0.0.8/task") {
		t.Fatalf("the edit page of a signed module: %d\n%s", st, body)
	}

	st, body = s.post(t, owner, page, form("name", "acme.bad", "timeout_ms", "10", "secret", "typed-s3cret"))
	if st != http.StatusBadRequest || !strings.Contains(body, "TimeoutMs") && !strings.Contains(body, "timeoutMs") || !strings.Contains(body, `value="acme.bad"`) ||
		strings.Contains(body, "typed-s3cret") {
		t.Fatalf("a refused register: %d\n%s", st, body)
	}
	st, body = s.post(t, owner, page, form("name", "acme.resize"))
	if st != http.StatusConflict {
		t.Fatalf("registering a name again: %d\n%s", st, body)
	}

	// An admin: allowPrivate is the owners' (the box is disabled, and the server refuses it).
	_, body = s.get(t, adminC, page)
	if !strings.Contains(body, `id="allow_private"  disabled`) && !strings.Contains(body, `id="allow_private" disabled`) {
		t.Fatalf("the admin's allowPrivate box is not disabled:\n%s", body)
	}
	st, body = s.post(t, adminC, page, form("name", "acme.sneaky", "transport", "http", "url", "http://10.0.0.9/", "secret", "s", "allow_private", "on"))
	if st != http.StatusForbidden || !strings.Contains(body, "owner") {
		t.Fatalf("an admin sets allowPrivate: %d\n%s", st, body)
	}
	// ... but edits the owner's private module, keeping its URL, secret and allowPrivate.
	loc = s.location(t, adminC, page+"/acme.local", url.Values{"description": {"edited by the admin"}, "transport": {"http"},
		"url": {"http://10.0.0.8/task"}, "allow_private": {"on"}, "price": {"1"}, "timeout_ms": {"60000"}})
	_, body = s.get(t, adminC, loc)
	if !strings.Contains(body, "Version 2") || !strings.Contains(body, "edited by the admin") || !strings.Contains(body, "a secret is set") {
		t.Fatalf("after the admin's edit:\n%s", body)
	}

	_, body = s.get(t, owner, page+"?delete=acme.resize")
	if !strings.Contains(body, `id="confirm-delete"`) {
		t.Fatalf("no confirmation:\n%s", body)
	}
	loc = s.location(t, owner, page, url.Values{"action": {"delete"}, "name": {"acme.resize"}})
	_, body = s.get(t, owner, loc)
	if strings.Contains(body, `data-module="acme.resize"`) || !strings.Contains(body, "acme.resize deleted") {
		t.Fatalf("after deleting:\n%s", body)
	}
	if st, _ := s.get(t, owner, page+"/acme.resize"); st != http.StatusNotFound {
		t.Fatalf("the deleted module's page: %d", st)
	}
}
