package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/apikeys"
)

// TestAPIKeyAndBootstrapCommands drives `admin bootstrap` and `admin apikey` through the built
// binary, as scripts/run.sh and an operator do.
func TestAPIKeyAndBootstrapCommands(t *testing.T) {
	c := newCLI(t)

	// On an empty database bootstrap creates everything (migrating first) and prints the key.
	res := c.ok("admin", "bootstrap", "--if-empty", "--email", "boot@example.com", "--password", "password-123",
		"--workspace", "default", "--credits", "1000", "--plan-usage", "50", "--json")
	var printed map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &printed); err != nil {
		t.Fatalf("bootstrap output: %v\n%s", err, res)
	}
	boot := map[string]string{}
	for _, f := range []string{"userId", "workspaceId", "apiKey", "apiSecret", "apiKeyId"} {
		if boot[f], _ = printed[f].(string); boot[f] == "" {
			t.Fatalf("bootstrap printed no %s: %s", f, res.stdout)
		}
	}
	if len(printed) != 6 || printed["staff"] != true {
		t.Fatalf("bootstrap printed extra fields, or no \"staff\": true: %s", res.stdout)
	}
	// The bootstrap user is staff (reviews apps at /review): the log records it so.
	var staff bool
	if err := pgxQueryRow(t, c.databaseURL(), `SELECT bool_and((data->>'staff')::boolean) FROM events WHERE type = 'UserRegistered'`, &staff); err != nil || !staff {
		t.Fatalf("the bootstrap user is not registered as staff: %v", err)
	}
	if id, err := apikeys.ParseID(boot["apiKey"]); err != nil || id != boot["apiKeyId"] {
		t.Fatalf("apiKey %q does not embed apiKeyId %s", boot["apiKey"], boot["apiKeyId"])
	}
	if _, err := apikeys.ParseSecret(boot["apiSecret"]); err != nil {
		t.Fatalf("apiSecret: %v", err)
	}
	if !strings.Contains(res.stderr, "shown this once") {
		t.Fatalf("no warning about the secret on stderr: %s", res)
	}
	var bal map[string]any
	c.okJSON(&bal, "admin", "credits", "topup", "--workspace", boot["workspaceId"], "--amount", "1", "--json")
	if bal["credit"] != float64(1001) || bal["usage"] != float64(50) {
		t.Fatalf("balance after bootstrap and a top-up of 1: %v", bal)
	}

	// Run again as scripts/run.sh does on every start: nothing happens.
	res = c.ok("admin", "bootstrap", "--if-empty", "--email", "other@example.com", "--password", "password-456",
		"--workspace", "again", "--json")
	if strings.TrimSpace(res.stdout) != "{\n  \"skipped\": true\n}" {
		t.Fatalf("second bootstrap: %s", res)
	}
	// Without --if-empty an existing user is reused only with the right password.
	if res := c.run("admin", "bootstrap", "--email", "boot@example.com", "--password", "wrong-password", "--workspace", "x", "--json"); res.code == 0 ||
		!strings.Contains(res.stderr, "exists already") {
		t.Fatalf("bootstrap over an existing user with another password: %s", res)
	}
	var second map[string]any
	c.okJSON(&second, "admin", "bootstrap", "--email", "BOOT@example.com", "--password", "password-123", "--workspace", "second", "--json")
	if second["userId"] != boot["userId"] || second["workspaceId"] == boot["workspaceId"] {
		t.Fatalf("second bootstrap of the same user: %v", second)
	}

	// apikey create prints the SPEC.md 2.10 record.
	expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	wf1, wf2 := cliWorkflow(t, c, boot["workspaceId"], "Deploy"), cliWorkflow(t, c, boot["workspaceId"], "Report")
	res = c.ok("admin", "apikey", "create", "--workspace", boot["workspaceId"], "--label", "CI",
		"--allowed-workflow", wf1, "--allowed-workflow", wf2, "--expires-at", expires.Format(time.RFC3339), "--json")
	var key struct {
		ID                 string     `json:"id"`
		APIKey             string     `json:"apiKey"`
		APISecret          string     `json:"apiSecret"`
		Label              string     `json:"label"`
		AllowedWorkflowIDs []string   `json:"allowedWorkflowIds"`
		ExpiresAt          *time.Time `json:"expiresAt"`
		CreatedAt          time.Time  `json:"createdAt"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &key); err != nil {
		t.Fatalf("apikey create output: %v\n%s", err, res)
	}
	if !strings.HasPrefix(key.APIKey, "ws_") || key.APISecret == "" || key.Label != "CI" || strings.Join(key.AllowedWorkflowIDs, ",") != wf1+","+wf2 ||
		key.ExpiresAt == nil || !key.ExpiresAt.Equal(expires) || key.CreatedAt.IsZero() {
		t.Fatalf("apikey create: %s", res.stdout)
	}
	if !strings.Contains(res.stderr, "shown this once") {
		t.Fatalf("no warning about the secret on stderr: %s", res)
	}
	res = c.ok("admin", "apikey", "create", "--workspace", boot["workspaceId"], "--json")
	if !strings.Contains(res.stdout, `"allowedWorkflowIds": []`) || !strings.Contains(res.stdout, `"expiresAt": null`) {
		t.Fatalf("defaults must print [] and null: %s", res.stdout)
	}

	var revoked map[string]any
	c.okJSON(&revoked, "admin", "apikey", "revoke", "--id", key.ID, "--reason", "test", "--json")
	if revoked["id"] != key.ID || revoked["revoked"] != true || revoked["revokedAt"] == nil || revoked["workspaceId"] != boot["workspaceId"] {
		t.Fatalf("revoke: %v", revoked)
	}
	c.ok("admin", "apikey", "revoke", "--id", key.ID) // twice is harmless
	// A scope naming no workflow of the workspace (another's, or none) is refused, naming it.
	if res := c.run("admin", "apikey", "create", "--workspace", second["workspaceId"].(string), "--allowed-workflow", wf1); res.code == 0 ||
		!strings.Contains(res.stderr, `allowedWorkflowIds: names no workflow of this workspace: "`+wf1+`"`) {
		t.Errorf("a key of another workspace's workflow: %s", res)
	}

	for name, args := range map[string][]string{
		"unknown workspace":  {"admin", "apikey", "create", "--workspace", "9b2f0c3e-0000-4000-8000-000000000000"},
		"bad expiry":         {"admin", "apikey", "create", "--workspace", boot["workspaceId"], "--expires-at", "tomorrow"},
		"expiry in the past": {"admin", "apikey", "create", "--workspace", boot["workspaceId"], "--expires-at", "2020-01-01T00:00:00Z"},
		"empty workflow id":  {"admin", "apikey", "create", "--workspace", boot["workspaceId"], "--allowed-workflow", ""},
		"unknown key":        {"admin", "apikey", "revoke", "--id", "9b2f0c3e-0000-4000-8000-000000000000"},
		"bad credits":        {"admin", "bootstrap", "--email", "n@example.com", "--password", "password-123", "--workspace", "w", "--credits", "lots"},
	} {
		if res := c.run(args...); res.code == 0 || res.stderr == "" {
			t.Errorf("%s: %s", name, res)
		}
	}
}

// --workspace takes the workspace's name where no other workspace has it, as the docs call the
// bootstrap workspace "default"; a name two workspaces share is refused with both ids.
func TestWorkspaceFlagTakesAUniqueName(t *testing.T) {
	c := newCLI(t)
	var boot map[string]any
	c.okJSON(&boot, "admin", "bootstrap", "--email", "boot@example.com", "--password", "password-123", "--workspace", "default", "--json")
	ws := boot["workspaceId"].(string)
	var bal map[string]any
	c.okJSON(&bal, "admin", "credits", "topup", "--workspace", "default", "--amount", "2", "--json")
	if bal["workspaceId"] != ws || bal["credit"] != float64(2) {
		t.Fatalf("topup --workspace default: %v, want workspace %s", bal, ws)
	}
	wf := cliWorkflow(t, c, "default", "Deploy")
	var key map[string]any
	c.okJSON(&key, "admin", "apikey", "create", "--workspace", "default", "--allowed-workflow", wf, "--json")
	if res := c.ok("admin", "workflow", "get", wf, "--workspace", "default"); !strings.Contains(res.stdout, wf) {
		t.Fatalf("workflow get --workspace default: %s", res)
	}

	if res := c.run("admin", "credits", "topup", "--workspace", "nowhere", "--amount", "1"); res.code == 0 ||
		!strings.Contains(res.stderr, `--workspace "nowhere": no workspace has this id or name`) {
		t.Errorf("an unknown name: %s", res)
	}
	var again map[string]any
	c.okJSON(&again, "admin", "workspace", "create", "--name", "default", "--owner", "boot@example.com", "--json")
	res := c.run("admin", "credits", "topup", "--workspace", "default", "--amount", "1")
	if res.code == 0 || !strings.Contains(res.stderr, `--workspace "default": 2 workspaces have this name; pass the id of one:`) ||
		!strings.Contains(res.stderr, ws) || !strings.Contains(res.stderr, fmt.Sprint(again["workspaceId"])) || !strings.Contains(res.stderr, "boot@example.com") {
		t.Errorf("a name two workspaces share: %s", res)
	}
	c.ok("admin", "credits", "topup", "--workspace", ws, "--amount", "1") // the id still works
}

// cliWorkflow creates a workflow named name in ws with `admin workflow create` and returns its id.
func cliWorkflow(t *testing.T, c *cli, ws, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "def.json")
	def := `{"name": "` + name + `", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`
	if err := os.WriteFile(path, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	var wf map[string]any
	c.okJSON(&wf, "admin", "workflow", "create", "--workspace", ws, "--file", path, "--json")
	id, _ := wf["id"].(string)
	if id == "" {
		t.Fatalf("workflow create printed %v", wf)
	}
	return id
}

// pgxQueryRow runs one query on the test's database and scans its one row into dest.
func pgxQueryRow(t *testing.T, dbURL, query string, dest ...any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, query).Scan(dest...)
}
