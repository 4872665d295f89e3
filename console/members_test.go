package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestMemberRolesThroughTheConsole drives the members page's forms over HTTP, with the CSRF
// token a browser sends: adding is never a role change, only owners change an owner, and the
// last owner can be neither demoted nor removed.
func TestMemberRolesThroughTheConsole(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	adm := s.person(t, "admin")
	ws := "/workspaces/" + s.ws + "/members"
	owner := s.client(t, s.owner)
	roleOf := func(p person) string {
		t.Helper()
		st, err := s.env.Cmds.Workspaces.Workspace(context.Background(), s.ws)
		if err != nil {
			t.Fatal(err)
		}
		return st.Members[p.ID]
	}
	expect := func(what string, c *http.Client, form url.Values, status int, want string) string {
		t.Helper()
		st, body := s.post(t, c, ws, form)
		if st != status || !strings.Contains(body, want) {
			t.Fatalf("%s: %d, want %d with %q\n%s", what, st, status, want, body)
		}
		return body
	}

	expect("the owner adds an admin", owner, url.Values{"action": {"add"}, "email": {adm.Email}, "role": {"admin"}}, http.StatusOK,
		adm.Email+" is now an admin")
	admin := s.client(t, adm)

	// The hole: an admin "adding" the owner as a member demoted them. Adding is refused now.
	expect("an admin re-adds the owner as a member", admin, url.Values{"action": {"add"}, "email": {s.owner.Email}, "role": {"member"}},
		http.StatusConflict, "lready a member of this workspace; change their role instead")
	expect("the owner re-adds the admin as a member", owner, url.Values{"email": {adm.Email}, "role": {"member"}},
		http.StatusConflict, "lready a member")
	if roleOf(s.owner) != "owner" || roleOf(adm) != "admin" {
		t.Fatalf("after the refused adds: owner is %q, admin is %q", roleOf(s.owner), roleOf(adm))
	}

	// Only owners change an owner, and the page offers an admin no form for one.
	expect("an admin demotes the owner", admin, url.Values{"action": {"set-role"}, "user_id": {s.owner.ID}, "role": {"member"}},
		http.StatusForbidden, "nly an owner changes an owner&#39;s role")
	expect("an admin removes the owner", admin, url.Values{"action": {"remove"}, "user_id": {s.owner.ID}},
		http.StatusForbidden, "nly an owner changes an owner&#39;s role")
	expect("an admin makes themself owner", admin, url.Values{"action": {"set-role"}, "user_id": {adm.ID}, "role": {"owner"}},
		http.StatusForbidden, "our role (admin) cannot give the role owner")
	if _, body := s.get(t, admin, ws); strings.Contains(body, `id="role-`+s.owner.ID+`"`) || !strings.Contains(body, "Only owners change an owner") {
		t.Fatalf("the admin's members page offers to change the owner:\n%s", body)
	}
	if roleOf(s.owner) != "owner" {
		t.Fatalf("the owner is %q after the admin's tries", roleOf(s.owner))
	}

	// The last owner stays, whoever asks; a form without the CSRF token does nothing.
	expect("the last owner demotes themself", owner, url.Values{"action": {"set-role"}, "user_id": {s.owner.ID}, "role": {"admin"}},
		http.StatusConflict, "last owner can be neither demoted nor removed")
	expect("the last owner removes themself", owner, url.Values{"action": {"remove"}, "user_id": {s.owner.ID}},
		http.StatusConflict, "last owner can be neither demoted nor removed")
	expect("a forged form", owner, url.Values{"csrf_token": {strings.Repeat("x", 43)}, "action": {"remove"}, "user_id": {s.member.ID}},
		http.StatusForbidden, "This form has expired")
	if _, body := s.get(t, owner, ws); !strings.Contains(body, "(the last owner)") || strings.Contains(body, `id="role-`+s.owner.ID+`"`) {
		t.Fatalf("the members page offers to change the last owner:\n%s", body)
	}

	// With a second owner, an owner may step down; the admin still cannot touch the new owner.
	expect("the owner promotes the admin", owner, url.Values{"action": {"set-role"}, "user_id": {adm.ID}, "role": {"owner"}},
		http.StatusOK, adm.Email+" is now an owner")
	expect("the first owner steps down", owner, url.Values{"action": {"set-role"}, "user_id": {s.owner.ID}, "role": {"admin"}},
		http.StatusOK, s.owner.Email+" is now an admin")
	expect("the ex-owner demotes the new owner", owner, url.Values{"action": {"set-role"}, "user_id": {adm.ID}, "role": {"member"}},
		http.StatusForbidden, "nly an owner changes an owner")
	expect("the new owner, the last, leaves", admin, url.Values{"action": {"remove"}, "user_id": {adm.ID}},
		http.StatusConflict, "last owner")

	// Removing asks first, then takes the member out at once.
	if _, body := s.get(t, admin, ws+"?remove="+s.member.ID); !strings.Contains(body, `id="confirm-remove"`) || !strings.Contains(body, "Remove "+s.member.Email+"?") {
		t.Fatalf("no confirmation before removing:\n%s", body)
	}
	expect("the owner removes the member", admin, url.Values{"action": {"remove"}, "user_id": {s.member.ID}}, http.StatusOK,
		s.member.Email+" is no longer a member")
	if roleOf(s.member) != "" {
		t.Fatalf("the removed member is still %q", roleOf(s.member))
	}
	if st, body := s.get(t, s.client(t, s.member), "/workspaces/"+s.ws); st != http.StatusForbidden || !strings.Contains(body, "not a member") {
		t.Fatalf("the removed member opens the workspace: %d", st)
	}
}
