package projections

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// Executions projects component executions: what the executor's sweep looks for (work never
// claimed, leases run out, retries due) and what operators list.
type Executions struct{}

// Name implements Projector.
func (Executions) Name() string { return "executions" }

// Tables implements Projector.
func (Executions) Tables() []string { return []string{"executions"} }

// Filter implements Projector.
func (Executions) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(execution.Submitted{}, execution.Started{}, execution.AttemptFailed{},
		execution.Completed{}, execution.Failed{}, execution.LeaseExtended{})}
}

// Migrate implements Projector.
func (Executions) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS executions (
		id            uuid PRIMARY KEY,
		workspace_id  text NOT NULL,
		module        text NOT NULL,
		status        text NOT NULL,
		attempt       int NOT NULL DEFAULT 0,
		attempts      int NOT NULL,
		cached_from   text NOT NULL DEFAULT '',
		lease_until   timestamptz,
		retry_at      timestamptz,
		total_usage   bigint NOT NULL DEFAULT 0,
		error         jsonb,
		created_at    timestamptz NOT NULL,
		updated_at    timestamptz NOT NULL
	);
	-- run_id came after the table: executions recorded before it show no run until a rebuild.
	ALTER TABLE executions ADD COLUMN IF NOT EXISTS run_id text NOT NULL DEFAULT '';
	CREATE INDEX IF NOT EXISTS executions_unfinished ON executions (updated_at) WHERE status IN ('CREATED', 'RUNNING');
	CREATE INDEX IF NOT EXISTS executions_workspace ON executions (workspace_id, created_at DESC);`)
	return err
}

// Apply implements Projector.
func (Executions) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case execution.Submitted:
		tx.Exec(`INSERT INTO executions (id, workspace_id, module, status, attempts, cached_from, run_id, created_at, updated_at)
			VALUES ($1, $2, $3, 'CREATED', $4, $5, $6, $7, $7) ON CONFLICT (id) DO NOTHING`,
			e.ExecutionID, e.WorkspaceID, e.Module, e.Attempts, e.CachedFrom, e.RunID, e.At)
	case execution.Started:
		tx.Exec(`UPDATE executions SET status = 'RUNNING', attempt = $2, lease_until = $3, retry_at = NULL, updated_at = $4 WHERE id = $1`,
			e.ExecutionID, e.Attempt, e.LeaseUntil, e.At)
	case execution.LeaseExtended:
		tx.Exec(`UPDATE executions SET lease_until = $2, updated_at = $3 WHERE id = $1`, e.ExecutionID, e.LeaseUntil, e.At)
	case execution.AttemptFailed:
		tx.Exec(`UPDATE executions SET lease_until = NULL, retry_at = $2, error = $3, updated_at = $4 WHERE id = $1`,
			e.ExecutionID, e.RetryAt, string(e.Error), e.At)
	case execution.Completed:
		// attempt: a call run first completes without a Started (DecideCompleteFirst).
		tx.Exec(`UPDATE executions SET status = 'COMPLETED', attempt = $4, lease_until = NULL, retry_at = NULL, error = NULL, total_usage = $2, updated_at = $3 WHERE id = $1`,
			e.ExecutionID, int64(e.TotalUsage), e.At, e.Attempt)
	case execution.Failed:
		tx.Exec(`UPDATE executions SET status = 'FAILED', lease_until = NULL, retry_at = NULL, error = $2, updated_at = $3 WHERE id = $1`,
			e.ExecutionID, string(e.Error), e.At)
	}
	return nil
}

// ClaimableExecutions lists up to limit unfinished executions a worker may claim at now:
// never claimed for longer than grace (the live path missed them), due for a retry for longer
// than grace, or running under a lease that ran out.
func (q *Queries) ClaimableExecutions(ctx context.Context, now time.Time, grace time.Duration, limit int) ([]string, error) {
	before := now.Add(-grace)
	rows, err := q.db.Query(ctx, `SELECT id::text FROM executions
		WHERE status IN ('CREATED', 'RUNNING') AND (
			(status = 'CREATED' AND created_at < $1) OR
			(retry_at IS NOT NULL AND retry_at < $1) OR
			(status = 'RUNNING' AND retry_at IS NULL AND lease_until < $2))
		ORDER BY updated_at LIMIT $3`, before, now, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ExecutionCounts counts a workspace's executions by status (every workspace for "").
func (q *Queries) ExecutionCounts(ctx context.Context, workspaceID string) (map[string]int, error) {
	rows, err := q.db.Query(ctx, `SELECT status, count(*) FROM executions WHERE $1 = '' OR workspace_id = $1 GROUP BY status`, workspaceID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

// HasCharge reports whether the billing history holds the charge for cause.
func (q *Queries) HasCharge(ctx context.Context, workspaceID, cause string) (bool, error) {
	var ok bool
	err := q.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM billing_transactions WHERE workspace_id = $1 AND kind = 'charge' AND reference = $2)`,
		workspaceID, cause).Scan(&ok)
	return ok, err
}
