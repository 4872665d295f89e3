package main

import (
	"context"
	"strings"
	"testing"
)

// migrate tells the operator of a log whose stream names do not compare bytewise (created
// before they did) how to convert it, and says nothing once the documented conversion ran.
func TestMigrateNotesAnOlderLogsCollation(t *testing.T) {
	c := newCLI(t)
	const note = "stream names use the database's collation"
	if res := c.ok("migrate"); strings.Contains(res.stderr, note) {
		t.Fatalf("migrate of a new log notes its collation: %s", res)
	}
	conn := c.connect(t)
	defer conn.Close(context.Background())
	older := `ALTER TABLE streams ALTER COLUMN name TYPE text COLLATE "default";
		ALTER TABLE events ALTER COLUMN stream TYPE text COLLATE "default"`
	if _, err := conn.Exec(context.Background(), older); err != nil {
		t.Fatalf("make the log an older one: %v", err)
	}
	res := c.ok("migrate")
	if !strings.Contains(res.stderr, note) || !strings.Contains(res.stderr, "docs/operations.md") ||
		strings.TrimSpace(res.stdout) != "schema is up to date" {
		t.Fatalf("migrate of an older log: want the note on standard error and one line on standard output: %s", res)
	}
	// The conversion docs/operations.md gives.
	conversion := `BEGIN;
		ALTER TABLE streams ALTER COLUMN name TYPE text COLLATE "C";
		ALTER TABLE events ALTER COLUMN stream TYPE text COLLATE "C";
		COMMIT;`
	if _, err := conn.Exec(context.Background(), conversion); err != nil {
		t.Fatalf("convert the log: %v", err)
	}
	if res := c.ok("migrate"); strings.Contains(res.stderr, note) {
		t.Fatalf("migrate after the conversion still notes the collation: %s", res)
	}
}

// migrate leaves a log that keeps its payloads as jsonb as it is and says, on standard error,
// how to convert it; once converted as docs/operations.md gives, it says nothing.
func TestMigrateNotesAnOlderLogsPayloads(t *testing.T) {
	c := newCLI(t)
	const note = "keeps its payloads as jsonb"
	if res := c.ok("migrate"); strings.Contains(res.stderr, note) {
		t.Fatalf("migrate of a new log notes its payloads: %s", res)
	}
	conn := c.connect(t)
	defer conn.Close(context.Background())
	older := `ALTER TABLE events ALTER COLUMN data TYPE jsonb USING data::jsonb,
		ALTER COLUMN metadata TYPE jsonb USING metadata::jsonb`
	if _, err := conn.Exec(context.Background(), older); err != nil {
		t.Fatalf("make the log an older one: %v", err)
	}
	res := c.ok("migrate")
	if !strings.Contains(res.stderr, note) || !strings.Contains(res.stderr, "docs/operations.md") ||
		strings.TrimSpace(res.stdout) != "schema is up to date" {
		t.Fatalf("migrate of an older log: want the note on standard error and one line on standard output: %s", res)
	}
	// The conversion docs/operations.md gives.
	conversion := `ALTER TABLE events ALTER COLUMN data TYPE json USING data::json,
		ALTER COLUMN metadata TYPE json USING metadata::json`
	if _, err := conn.Exec(context.Background(), conversion); err != nil {
		t.Fatalf("convert the log: %v", err)
	}
	if res := c.ok("migrate"); strings.Contains(res.stderr, note) {
		t.Fatalf("migrate after the conversion still notes the payloads: %s", res)
	}
}
