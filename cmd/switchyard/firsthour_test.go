package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The first hour of a new user (issue 13): the CLI finds the checkout's database, the secret-key
// warning appears once, and the billing audit does not wait for a projector nobody runs.

// runIn runs the binary in dir with the CLI's environment minus DATABASE_URL, as a user runs
// bin/switchyard from a checkout after scripts/run.sh.
func (c *cli) runIn(dir string, args ...string) result {
	c.t.Helper()
	var env []string
	for _, kv := range c.env {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env, cmd.Dir = env, dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("switchyard %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// writeRecord writes a checkout's .data/database.env as scripts/postgres.sh does.
func writeRecord(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".data", "database.env"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCLIUsesRecordedDatabase: without DATABASE_URL the CLI uses the database scripts/run.sh
// recorded for the checkout, and says where it looked when that database does not answer.
func TestCLIUsesRecordedDatabase(t *testing.T) {
	c := newCLI(t)
	c.ok("migrate")
	var dbURL string
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, "DATABASE_URL="); ok {
			dbURL = v
		}
	}
	checkout := t.TempDir()
	writeRecord(t, checkout, "# written by scripts/postgres.sh\nDATABASE_URL="+dbURL+"\nSOURCE=private\n")
	res := c.runIn(checkout, "admin", "user", "create", "--email", "recorded@example.com", "--password", "password-123", "--json")
	if res.code != 0 {
		t.Fatalf("user create in a checkout with a recorded database: %s", res)
	}
	var n int
	if err := pgxQueryRow(t, c.databaseURL(), `SELECT count(*) FROM events WHERE type = 'UserRegistered' AND data->>'email' = 'recorded@example.com'`, &n); err != nil || n != 1 {
		t.Fatalf("the user is not in the recorded database (%d events): %v", n, err)
	}

	// A recorded server that does not answer is an error naming the record, not a quiet move
	// to the default 127.0.0.1:5432.
	dead := t.TempDir()
	writeRecord(t, dead, "DATABASE_URL=postgres://postgres@127.0.0.1:1/switchyard?sslmode=disable\nSOURCE=private\n")
	res = c.runIn(dead, "billing", "audit", "ws-1")
	if res.code == 0 || !strings.Contains(res.stderr, filepath.Join(".data", "database.env")) || !strings.Contains(res.stderr, "scripts/postgres.sh start") {
		t.Fatalf("audit against a stopped recorded database: %s", res)
	}
	broken := t.TempDir()
	writeRecord(t, broken, "SOURCE=private\n")
	if res := c.runIn(broken, "migrate"); res.code == 0 || !strings.Contains(res.stderr, "DATABASE_URL") || !strings.Contains(res.stderr, "database.env") {
		t.Fatalf("migrate with a record without a URL: %s", res)
	}
	// DATABASE_URL, when set, wins over the record.
	if res := c.run("migrate"); res.code != 0 {
		t.Fatalf("migrate with DATABASE_URL: %s", res)
	}
}

// TestFirstStartWarnsOnce walks scripts/run.sh's first start (migrate, bootstrap, serve) and a
// later CLI command: the generated secret key is reported once, by serve; the audit does not
// wait for a billing projector no process runs.
func TestFirstStartWarnsOnce(t *testing.T) {
	c := newCLI(t)
	const keyVar = "SWITCHYARD_SECRET_KEY"
	if res := c.ok("migrate"); strings.Contains(res.stderr, keyVar) {
		t.Fatalf("migrate warns about the secret key: %s", res)
	}
	var boot map[string]any
	res := c.ok("admin", "bootstrap", "--if-empty", "--email", "admin@localhost", "--password", "password-123",
		"--workspace", "default", "--credits", "1000", "--json")
	if strings.Contains(res.stderr, keyVar) {
		t.Fatalf("bootstrap warns about the secret key: %s", res)
	}
	if err := json.Unmarshal([]byte(res.stdout), &boot); err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, res)
	}
	ws, _ := boot["workspaceId"].(string)

	srv := c.serve()
	c.waitHTTP(srv, "/readyz", time.Minute, func(status int, _ string) bool { return status == http.StatusOK })
	if n := strings.Count(srv.out.String(), keyVar+" is not set"); n != 1 || !strings.Contains(srv.out.String(), "generated a new secret key") {
		t.Fatalf("serve's first start reports the generated key %d times, want once:\n%s", n, srv.out)
	}
	if res := c.ok("billing", "audit", "--wait", "1m", ws); !strings.Contains(res.stdout, "audit: clean") {
		t.Fatalf("audit while serve runs: %s", res)
	}
	srv.stop(t, 30*time.Second)

	// Later commands reuse the key without a word about it.
	res = c.ok("admin", "credits", "topup", "--workspace", ws, "--amount", "5")
	if strings.Contains(res.stderr, keyVar) {
		t.Fatalf("a CLI command warns about the reused secret key: %s", res)
	}
	res = c.run("billing", "audit", ws)
	if res.code != 0 || strings.Contains(res.stderr, keyVar) || strings.Contains(res.stderr, "waiting") ||
		!strings.Contains(res.stderr, "no serve process runs its projector") || !strings.Contains(res.stdout, "behind") {
		t.Fatalf("audit with no serve running: want no wait and a note that the read model is behind: %s", res)
	}
}
