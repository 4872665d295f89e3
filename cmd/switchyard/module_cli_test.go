package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIModules registers, shows, updates, lists and deletes a workspace module from the
// command line; the secret is never printed, and refusals name the field.
func TestCLIModules(t *testing.T) {
	c := newCLI(t)
	c.ok("migrate")
	c.ok("admin", "user", "create", "--email", "olga@example.com", "--password", "correct horse battery")
	var ws struct {
		WorkspaceID string `json:"workspaceId"`
	}
	c.okJSON(&ws, "admin", "workspace", "create", "--name", "Acme", "--owner", "olga@example.com", "--json")
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	reg := file("resize.json", `{"name": "acme.resize", "price": 0.25, "transport":
		{"type": "http", "url": "http://10.0.0.8/resize", "secret": "cli-s3cret", "allowPrivate": true}}`)
	var m struct {
		Name      string
		Price     float64
		Version   int
		Transport struct {
			AllowPrivate, Signed bool
		}
	}
	res := c.ok("admin", "module", "register", "--workspace", "Acme", "--file", reg, "--json")
	if strings.Contains(res.stdout, "cli-s3cret") {
		t.Fatalf("the secret was printed: %s", res)
	}
	c.okJSON(&m, "admin", "module", "show", "acme.resize", "--workspace", ws.WorkspaceID, "--json")
	if m.Name != "acme.resize" || m.Price != 0.25 || !m.Transport.AllowPrivate || !m.Transport.Signed || m.Version != 1 {
		t.Fatalf("show: %+v", m)
	}
	if res := c.run("admin", "module", "register", "--workspace", "Acme", "--file", reg); res.code == 0 || !strings.Contains(res.stderr, "already registered") {
		t.Fatalf("a second register: %s", res)
	}
	bad := file("bad.json", `{"name": "acme.bad", "timeoutMs": 10, "transport": {"type": "worker"}}`)
	if res := c.run("admin", "module", "register", "--workspace", "Acme", "--file", bad); res.code == 0 || !strings.Contains(res.stderr, "timeoutMs") {
		t.Fatalf("a bad timeout: %s", res)
	}
	c.okJSON(&m, "admin", "module", "update", "acme.resize", "--workspace", "Acme", "--json",
		"--file", file("update.json", `{"description": "resize", "transport": {"type": "http", "url": "http://10.0.0.8/resize", "allowPrivate": true}}`))
	if m.Version != 2 || !m.Transport.Signed || m.Price != 1 {
		t.Fatalf("update kept the secret and took the default price: %+v", m)
	}
	c.ok("projections", "rebuild", "modules")
	if res := c.ok("admin", "module", "list", "--workspace", "Acme"); !strings.Contains(res.stdout, "1 modules") || !strings.Contains(res.stdout, "acme.resize") {
		t.Fatalf("list: %s", res)
	}
	c.ok("admin", "module", "delete", "acme.resize", "--workspace", "Acme")
	if res := c.run("admin", "module", "show", "acme.resize", "--workspace", "Acme"); res.code == 0 || !strings.Contains(res.stderr, "not found") {
		t.Fatalf("show after delete: %s", res)
	}
}
