package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// frameworkDDL is the framework's own table: one checkpoint row per projector. A failed
// projector records its error here so /readyz turns red on every instance, not only the one
// that ran it.
const frameworkDDL = `
CREATE TABLE IF NOT EXISTS projection_checkpoints (
	name           text PRIMARY KEY,
	commit_pos     bigint NOT NULL DEFAULT 0,
	prepare_pos    bigint NOT NULL DEFAULT 0,
	events_applied bigint NOT NULL DEFAULT 0,
	last_event_at  timestamptz,
	updated_at     timestamptz NOT NULL DEFAULT now(),
	error          text
)`

// advanceDDL is the guard of a projector batch sent in one round trip (engine.go, applyAt): it
// moves the checkpoint from where this process last left it, and raises codeCheckpointMoved
// when it is no longer there (another instance, a rebuild or a reset moved it), so the batch's
// transaction rolls back before its writes commit. The UPDATE also takes the row lock that
// lockCheckpointSQL takes on the other path.
const advanceDDL = `
CREATE OR REPLACE FUNCTION projection_advance(
	p_name text, p_from_commit bigint, p_from_prepare bigint,
	p_to_commit bigint, p_to_prepare bigint, p_events bigint, p_last_event_at timestamptz
) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
	UPDATE projection_checkpoints
	SET commit_pos = p_to_commit, prepare_pos = p_to_prepare, events_applied = events_applied + p_events,
	    last_event_at = p_last_event_at, updated_at = now(), error = NULL
	WHERE name = p_name AND commit_pos = p_from_commit AND prepare_pos = p_from_prepare;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'projector %: checkpoint is no longer at (%, %)', p_name, p_from_commit, p_from_prepare
			USING ERRCODE = 'SW101';
	END IF;
END
$fn$`

// codeCheckpointMoved is raised by projection_advance.
const codeCheckpointMoved = "SW101"

// migrateAttempts bounds Migrate's attempts at its transaction.
const migrateAttempts = 5

// codeDeadlockDetected is PostgreSQL's deadlock_detected.
const codeDeadlockDetected = "40P01"

// Migrate creates the checkpoint table and every projector's live tables. Its transaction is
// tried again when PostgreSQL breaks a deadlock by rolling it back: a process that migrates
// while another already projects takes its tables' locks (an ALTER TABLE locks a table even
// when it changes nothing) and then waits for a checkpoint row, which a projector's batch can
// hold while it waits for one of those tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool, projectors []Projector) error {
	for attempt := 1; ; attempt++ {
		err := migrate(ctx, pool, projectors)
		var pgErr *pgconn.PgError
		if attempt < migrateAttempts && errors.As(err, &pgErr) && pgErr.Code == codeDeadlockDetected {
			continue
		}
		return err
	}
}

func migrate(ctx context.Context, pool *pgxpool.Pool, projectors []Projector) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Two processes migrating at once would race on CREATE TABLE IF NOT EXISTS.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey("projections:migrate")); err != nil {
			return fmt.Errorf("lock migration: %w", err)
		}
		if _, err := tx.Exec(ctx, frameworkDDL); err != nil {
			return fmt.Errorf("create projection_checkpoints: %w", err)
		}
		if _, err := tx.Exec(ctx, advanceDDL); err != nil {
			return fmt.Errorf("create projection_advance: %w", err)
		}
		for _, p := range projectors {
			if err := p.Migrate(ctx, tx); err != nil {
				return fmt.Errorf("migrate projector %s: %w", p.Name(), err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO projection_checkpoints (name) VALUES ($1) ON CONFLICT DO NOTHING`, p.Name()); err != nil {
				return fmt.Errorf("checkpoint row %s: %w", p.Name(), err)
			}
		}
		return nil
	})
}
