package main

import (
	"strings"
	"testing"
)

// TestCLIMemberRoles: add-member adds, set-role changes a role, remove-member takes a member
// out, and none of them leaves a workspace without an owner.
func TestCLIMemberRoles(t *testing.T) {
	c := newCLI(t)
	c.ok("migrate")
	for _, email := range []string{"olga@example.com", "arno@example.com"} {
		c.ok("admin", "user", "create", "--email", email, "--password", "correct horse battery")
	}
	var ws struct {
		WorkspaceID string `json:"workspaceId"`
	}
	c.okJSON(&ws, "admin", "workspace", "create", "--name", "Acme", "--owner", "olga@example.com", "--json")
	id := ws.WorkspaceID
	c.ok("admin", "workspace", "add-member", "--workspace", id, "--email", "arno@example.com", "--role", "admin")

	refused := func(what, want string, args ...string) {
		t.Helper()
		res := c.run(args...)
		if res.code == 0 || !strings.Contains(res.stderr, want) {
			t.Fatalf("%s: want a failure saying %q: %s", what, want, res)
		}
	}
	refused("add-member of a member", "already a member",
		"admin", "workspace", "add-member", "--workspace", id, "--email", "olga@example.com", "--role", "member")
	refused("set-role of the last owner", "last owner",
		"admin", "workspace", "set-role", "--workspace", id, "--email", "olga@example.com", "--role", "member")
	refused("remove-member of the last owner", "last owner",
		"admin", "workspace", "remove-member", "--workspace", id, "--email", "olga@example.com")
	refused("set-role to no role", "role",
		"admin", "workspace", "set-role", "--workspace", id, "--email", "arno@example.com", "--role", "king")

	var out struct {
		Email, Role string
	}
	c.okJSON(&out, "admin", "workspace", "set-role", "--workspace", id, "--email", "arno@example.com", "--role", "owner", "--json")
	if out.Email != "arno@example.com" || out.Role != "owner" {
		t.Fatalf("set-role: %+v", out)
	}
	if res := c.ok("admin", "workspace", "remove-member", "--workspace", id, "--email", "olga@example.com"); !strings.Contains(res.stdout, "no longer a member") {
		t.Fatalf("remove-member: %s", res)
	}
	refused("remove-member of the new last owner", "last owner",
		"admin", "workspace", "remove-member", "--workspace", id, "--email", "arno@example.com")
}
