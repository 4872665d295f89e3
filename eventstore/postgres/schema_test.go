package postgres

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/testdb"
)

// streamNameCollations returns the collation of streams.name and of events.stream.
func streamNameCollations(t *testing.T, pool *pgxpool.Pool) (name, stream string) {
	t.Helper()
	err := pool.QueryRow(testCtx(t), `
		SELECT max(c.collname) FILTER (WHERE a.attrelid = 'streams'::regclass),
		       max(c.collname) FILTER (WHERE a.attrelid = 'events'::regclass)
		FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
		WHERE (a.attrelid, a.attname) IN (('streams'::regclass, 'name'), ('events'::regclass, 'stream'))`).
		Scan(&name, &stream)
	if err != nil {
		t.Fatalf("read the stream names' collation: %v", err)
	}
	return name, stream
}

// A new log's stream names compare bytewise, whatever the database's locale: both indexes
// every append walks are on them (schemaSQL).
func TestStreamNamesCompareBytewise(t *testing.T) {
	pool, _ := newMigratedDB(t, 2)
	name, stream := streamNameCollations(t, pool)
	if name != "C" || stream != "C" {
		t.Fatalf("streams.name collates as %q and events.stream as %q, want both \"C\"", name, stream)
	}
	if bytewise, err := StreamNamesBytewise(testCtx(t), pool); err != nil || !bytewise {
		t.Fatalf("StreamNamesBytewise on a new log: %v, %v", bytewise, err)
	}
}

// migratedOlderLog creates a database whose log an earlier version made (the schema as older
// rewrites it), then runs Migrate on it, which must leave what differs as it is.
func migratedOlderLog(t *testing.T, older *strings.Replacer) *pgxpool.Pool {
	t.Helper()
	ctx := testCtx(t)
	pool := newPool(t, testdb.New(t), 4)
	schema := older.Replace(schemaSQL)
	if schema == schemaSQL {
		t.Fatal("the older schema is the new one")
	}
	if _, err := pool.Exec(ctx, schema+claimsSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("create the older schema: %v", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate an older log: %v", err)
	}
	return pool
}

// A log created before stream names collated bytewise keeps its collation through Migrate
// (converting it rebuilds two indexes, docs/operations.md), and works as before.
func TestMigrateKeepsAnOlderLogsCollation(t *testing.T) {
	ctx := testCtx(t)
	pool := migratedOlderLog(t, strings.NewReplacer(` COLLATE "C"`, ""))
	if name, stream := streamNameCollations(t, pool); name != "default" || stream != "default" {
		t.Fatalf("migrate changed an older log's collation to %q and %q", name, stream)
	}
	if bytewise, err := StreamNamesBytewise(ctx, pool); err != nil || bytewise {
		t.Fatalf("StreamNamesBytewise on an older log: %v, %v", bytewise, err)
	}
	st := newStore(t, pool, Config{})
	if _, err := st.Append(ctx, "order-1", eventstore.NoStream(), event("Placed")); err != nil {
		t.Fatalf("append to an older log: %v", err)
	}
	got, err := st.ReadStream(ctx, "order-1", 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("read back from an older log: %d events, %v", len(got), err)
	}
}
