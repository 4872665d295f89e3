package main

import (
	"context"
	"strings"
	"testing"
)

// migrate tells the operator of a log created by an earlier version how to convert it, once
// for each way it differs from a new log (stream names that do not compare bytewise, payloads
// kept as jsonb), and says nothing once the conversion docs/operations.md gives ran.
func TestMigrateNotesAnOlderLog(t *testing.T) {
	for _, tc := range []struct {
		name, note, older, conversion string
	}{{
		name: "collation", note: "stream names use the database's collation",
		older: `ALTER TABLE streams ALTER COLUMN name TYPE text COLLATE "default";
			ALTER TABLE events ALTER COLUMN stream TYPE text COLLATE "default"`,
		conversion: `BEGIN;
			ALTER TABLE streams ALTER COLUMN name TYPE text COLLATE "C";
			ALTER TABLE events ALTER COLUMN stream TYPE text COLLATE "C";
			COMMIT;`,
	}, {
		name: "payloads", note: "keeps its payloads as jsonb",
		older: `ALTER TABLE events ALTER COLUMN data TYPE jsonb USING data::jsonb,
			ALTER COLUMN metadata TYPE jsonb USING metadata::jsonb`,
		conversion: `ALTER TABLE events ALTER COLUMN data TYPE json USING data::json,
			ALTER COLUMN metadata TYPE json USING metadata::json`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			if res := c.ok("migrate"); strings.Contains(res.stderr, "note:") {
				t.Fatalf("migrate of a new log notes something: %s", res)
			}
			conn := c.connect(t)
			defer conn.Close(context.Background())
			if _, err := conn.Exec(context.Background(), tc.older); err != nil {
				t.Fatalf("make the log an older one: %v", err)
			}
			res := c.ok("migrate")
			if !strings.Contains(res.stderr, tc.note) || strings.Count(res.stderr, "note:") != 1 ||
				!strings.Contains(res.stderr, "docs/operations.md") || strings.TrimSpace(res.stdout) != "schema is up to date" {
				t.Fatalf("migrate of an older log: want its one note on standard error and one line on standard output: %s", res)
			}
			if _, err := conn.Exec(context.Background(), tc.conversion); err != nil {
				t.Fatalf("convert the log: %v", err)
			}
			if res := c.ok("migrate"); strings.Contains(res.stderr, "note:") {
				t.Fatalf("migrate after the conversion still notes something: %s", res)
			}
		})
	}
}
