package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
}
