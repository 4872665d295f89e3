package projections

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
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

// Migrate creates the checkpoint table and every projector's live tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool, projectors []Projector) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Two processes migrating at once would race on CREATE TABLE IF NOT EXISTS.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey("projections:migrate")); err != nil {
			return fmt.Errorf("lock migration: %w", err)
		}
		if _, err := tx.Exec(ctx, frameworkDDL); err != nil {
			return fmt.Errorf("create projection_checkpoints: %w", err)
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
