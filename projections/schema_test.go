package projections_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/testenv"
)

// altering is a projector whose migration locks its table, as an ALTER TABLE does even when
// it changes nothing.
type altering struct{}

func (altering) Name() string              { return "test_altering" }
func (altering) Filter() eventstore.Filter { return eventstore.Filter{} }
func (altering) Tables() []string          { return []string{"test_altering"} }
func (altering) Migrate(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS test_altering (id int)`); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `ALTER TABLE test_altering ADD COLUMN IF NOT EXISTS n int`)
	return err
}
func (altering) Apply(context.Context, *projections.Tx, eventstore.RecordedEvent) error { return nil }

// A process that migrates while another projects can deadlock with a projector's batch: the
// batch holds its checkpoint row and waits for a table the migration has locked, while the
// migration waits for that row. PostgreSQL rolls the migration back, and Migrate tries again
// once the batch is through, instead of failing the process's start.
func TestMigrateOutlivesADeadlockWithABatch(t *testing.T) {
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	if err := projections.Migrate(ctx, pool, []projections.Projector{altering{}}); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL rolls back the transaction whose deadlock check runs while the cycle exists.
	// The migration waits first, so its check usually finds the cycle, but on a loaded machine
	// the batch's read can come after that check found none, and then the batch is the one
	// rolled back: go again.
	const attempts = 5
	for i := range attempts {
		if deadlockMigrate(t, ctx, pool) {
			return
		}
		t.Logf("attempt %d: the batch was the one rolled back; again", i+1)
	}
	t.Fatalf("in %d attempts PostgreSQL never rolled back the migration", attempts)
}

// deadlockMigrate makes a migration and a projector's batch wait for each other, and reports
// whether the migration was the one PostgreSQL rolled back; either way Migrate must succeed.
func deadlockMigrate(t *testing.T, ctx context.Context, pool *pgxpool.Pool) bool {
	t.Helper()
	batch, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Rollback(ctx) //nolint:errcheck // a no-op after the commit or rollback below
	if _, err := batch.Exec(ctx, `UPDATE projection_checkpoints SET updated_at = now() WHERE name = 'test_altering'`); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() { migrated <- projections.Migrate(ctx, pool, []projections.Projector{altering{}}) }()
	testenv.Eventually(t, 30*time.Second, "the migration to wait for the checkpoint row", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'
			AND query LIKE 'INSERT INTO projection_checkpoints%'`).Scan(&n)
		return err == nil && n > 0
	})
	// The batch now reads the table the migration holds: a deadlock.
	_, err = batch.Exec(ctx, `SELECT count(*) FROM test_altering`)
	var pgErr *pgconn.PgError
	batchRolledBack := errors.As(err, &pgErr) && pgErr.Code == "40P01"
	switch {
	case batchRolledBack:
		if err := batch.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatal(err)
	default:
		if err := batch.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate in a deadlock with a batch: %v", err)
	}
	return !batchRolledBack
}
