package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/commands"
)

// `admin workflow create` issues the hook of an ON_WEBHOOK component as the workspace endpoint
// does, and prints its URL and secret this once; `update` keeps it and prints none.
func TestWorkflowCreateIssuesHooks(t *testing.T) {
	c := newCLI(t)
	var boot map[string]any
	c.okJSON(&boot, "admin", "bootstrap", "--email", "hooks@example.com", "--password", "password-123", "--workspace", "hooks", "--json")
	path := filepath.Join(t.TempDir(), "def.json")
	def := `{"name": "pushed", "components": [{"id": "push", "module": "ON_WEBHOOK", "config": {"scheme": "github"}}]}`
	if err := os.WriteFile(path, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	var wf struct {
		ID    string `json:"id"`
		Hooks []struct {
			ComponentID, URL, Token, Secret string
		} `json:"hooks"`
	}
	c.okJSON(&wf, "admin", "workflow", "create", "--workspace", "hooks", "--file", path, "--json")
	if len(wf.Hooks) != 1 || wf.Hooks[0].ComponentID != "push" || !strings.HasPrefix(wf.Hooks[0].URL, "/hooks/whk_") || !strings.HasPrefix(wf.Hooks[0].Secret, "whsec_") {
		t.Fatalf("workflow create printed %+v", wf)
	}
	res := c.ok("admin", "workflow", "update", wf.ID, "--workspace", "hooks", "--file", path)
	if strings.Contains(res.stdout, "hook ") || strings.Contains(res.stdout, wf.Hooks[0].Secret) {
		t.Fatalf("update printed a hook again: %s", res.stdout)
	}

	// `admin workflow hook rotate` issues a new URL and secret, printed this once.
	var rotated commands.IssuedHook
	c.okJSON(&rotated, "admin", "workflow", "hook", "rotate", wf.ID, "push", "--workspace", "hooks", "--json")
	if rotated.ComponentID != "push" || !strings.HasPrefix(rotated.URL, "/hooks/whk_") || rotated.URL == wf.Hooks[0].URL || rotated.Secret == wf.Hooks[0].Secret {
		t.Fatalf("hook rotate printed %+v after %+v", rotated, wf.Hooks[0])
	}
	human := c.ok("admin", "workflow", "hook", "rotate", wf.ID, "push", "--workspace", "hooks").stdout
	if !strings.Contains(human, "/hooks/whk_") || strings.Contains(human, rotated.URL) || !strings.Contains(human, "shown once") {
		t.Fatalf("hook rotate printed %q", human)
	}
	for what, args := range map[string][]string{
		"not found": {wf.ID, "nope"},
		"--secret":  {wf.ID, "push", "--secret", "short"},
	} {
		if res := c.run(append([]string{"admin", "workflow", "hook", "rotate", "--workspace", "hooks"}, args...)...); res.code == 0 || !strings.Contains(res.stderr, what) {
			t.Fatalf("hook rotate %v: %s, want an error with %q", args, res, what)
		}
	}
}
