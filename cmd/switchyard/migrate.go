package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/eventstore/postgres"
)

func newMigrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or update the event store and read-model schema (idempotent)",
		Long: "Migrate creates the schema in a new database, or brings an existing one up to date, and\n" +
			"says which it did: \"created the schema in a new database\", \"updated the schema\" or\n" +
			"\"schema is up to date\". It needs no secret key. On an event log created before stream names\n" +
			"compared bytewise, it notes on standard error how to convert them (docs/operations.md).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnvironment()
			if err != nil {
				return err
			}
			pool, err := newPool(cmd.Context(), cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := pool.Ping(cmd.Context()); err != nil {
				return connectError(cfg, err)
			}
			before, err := readSchemaShape(cmd.Context(), pool)
			if err != nil {
				return err
			}
			a := &app{cfg: cfg, log: cfg.NewLogger(os.Stderr), pool: pool}
			if err := a.migrate(cmd.Context()); err != nil {
				return err
			}
			after, err := readSchemaShape(cmd.Context(), pool)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), migrateOutcome(before, after))
			return noteOlderLog(cmd, a)
		},
	}
}

// schemaShape summarises the database's own tables, columns, indexes and functions, so that
// migrate can tell a new database from an updated or an unchanged one.
type schemaShape struct {
	switchyard  bool   // the projection checkpoints table exists: the schema was created before
	tables      int    // tables outside the system schemas
	fingerprint string // md5 of every relation, column, index and function definition
}

func readSchemaShape(ctx context.Context, pool *pgxpool.Pool) (schemaShape, error) {
	var s schemaShape
	err := pool.QueryRow(ctx, `
		WITH own AS (SELECT oid, nspname FROM pg_namespace
		             WHERE nspname NOT IN ('pg_catalog', 'information_schema')
		               AND nspname NOT LIKE 'pg\_toast%' AND nspname NOT LIKE 'pg\_temp%'),
		parts AS (
			SELECT own.nspname || '.' || c.relname || ':' || c.relkind::text || ':' ||
			       coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
			                                   CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ',' ORDER BY a.attnum)
			                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') ||
			       coalesce(':' || pg_get_indexdef(c.oid), '') AS part
			FROM pg_class c JOIN own ON own.oid = c.relnamespace
			WHERE c.relkind IN ('r', 'p', 'i', 'v', 'm', 'S')
			UNION ALL
			SELECT own.nspname || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || '):' || md5(p.prosrc)
			FROM pg_proc p JOIN own ON own.oid = p.pronamespace)
		SELECT to_regclass('projection_checkpoints') IS NOT NULL,
		       (SELECT count(*) FROM pg_class c JOIN own ON own.oid = c.relnamespace WHERE c.relkind IN ('r', 'p')),
		       coalesce(md5(string_agg(part, ';' ORDER BY part)), '')
		FROM parts`).Scan(&s.switchyard, &s.tables, &s.fingerprint)
	if err != nil {
		return s, fmt.Errorf("read the database's schema: %w", err)
	}
	return s, nil
}

// migrateOutcome is migrate's one line of output.
func migrateOutcome(before, after schemaShape) string {
	switch {
	case !before.switchyard:
		return fmt.Sprintf("created the schema in a new database (%d tables)", after.tables)
	case before.fingerprint != after.fingerprint:
		return fmt.Sprintf("updated the schema (%d tables, %d before)", after.tables, before.tables)
	default:
		return "schema is up to date"
	}
}

// olderLogNote is a way an event log created by an earlier version differs from a new one,
// which migrate leaves as it is because converting it locks the log: current reports whether
// the log is as a new one is, note what migrate says on standard error when it is not.
type olderLogNote struct {
	current func(context.Context, *pgxpool.Pool) (bool, error)
	note    string
}

// olderLogNotes are the conversions docs/operations.md gives for older logs.
var olderLogNotes = []olderLogNote{
	// Appends are faster once stream names compare bytewise ("Stream names' collation").
	{postgres.StreamNamesBytewise, "note: this event log's stream names use the database's collation; " +
		"converting them to \"C\" makes appends faster and locks the log for about a second a million events " +
		"(docs/operations.md, \"Stream names' collation\")"},
	// Appends and reads are cheaper once payloads are json ("Payloads as json").
	{postgres.PayloadsAsJSON, "note: this event log keeps its payloads as jsonb; " +
		"converting them to json makes appends and reads cheaper and rewrites the events table " +
		"(docs/operations.md, \"Payloads as json\")"},
}

// noteOlderLog tells the operator of a PostgreSQL log created by an earlier version how to
// convert it, one note for each way it differs from a new log.
func noteOlderLog(cmd *cobra.Command, a *app) error {
	if a.cfg.EventStore != config.EventStorePostgres {
		return nil
	}
	for _, n := range olderLogNotes {
		current, err := n.current(cmd.Context(), a.pool)
		if err != nil {
			return err
		}
		if !current {
			fmt.Fprintln(cmd.ErrOrStderr(), n.note)
		}
	}
	return nil
}
