package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPostgresShNamesTheServersReason: when the server on 5432 answers but turns the connection
// away for a passing reason, the service's database is not silently moved to a private cluster
// (that choice would be recorded for good), and the message quotes the server, not a guess
// about passwords. psql and pg_isready are stand-ins that answer as such a server does.
func TestPostgresShNamesTheServersReason(t *testing.T) {
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("postgres.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "scripts", "postgres.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := t.TempDir()
	for name, body := range map[string]string{
		"pg_isready": "exit 0\n",
		"psql": `echo 'psql: error: connection to server at "127.0.0.1", port 5432 failed: FATAL:  sorry, too many clients already' >&2` +
			"\nexit 2\n",
	} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-c", "source scripts/postgres.sh app")
	cmd.Dir = repo
	cmd.Env = []string{"PATH=" + fake + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + repo,
		"SWITCHYARD_PG_DIR=" + filepath.Join(repo, "pg")}
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err == nil {
		t.Fatalf("postgres.sh app succeeded against a server that refuses every connection:\n%s", text)
	}
	if !strings.Contains(text, "sorry, too many clients already") || strings.Contains(text, "without a password") ||
		strings.Contains(text, "private cluster") {
		t.Fatalf("want the server's reason, and no move to a private cluster:\n%s", text)
	}
	if _, err := os.Stat(filepath.Join(repo, ".data", "database.env")); err == nil {
		t.Fatal("a database was recorded although none was usable")
	}
}
