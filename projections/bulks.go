package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/bulk"
	"github.com/switchyard/switchyard/eventstore"
)

// Bulks projects bulk actions' progress: what the bulks reactor's sweep resumes (bulks not
// completed) and what the console lists on a workflow's page. A bulk's own GET folds its
// stream.
type Bulks struct{}

// Name implements Projector.
func (Bulks) Name() string { return "bulks" }

// Tables implements Projector.
func (Bulks) Tables() []string { return []string{"bulks"} }

// Filter implements Projector.
func (Bulks) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(bulk.Requested{}, bulk.Progressed{}, bulk.Completed{})}
}

// Migrate implements Projector.
func (Bulks) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS bulks (
		id           uuid PRIMARY KEY,
		workspace_id text NOT NULL,
		workflow_id  text NOT NULL,
		action       text NOT NULL,
		filter       jsonb NOT NULL,
		reason       text NOT NULL,
		status       text NOT NULL,
		matched      int NOT NULL,
		done         int NOT NULL DEFAULT 0,
		failed       int NOT NULL DEFAULT 0,
		created_at   timestamptz NOT NULL,
		updated_at   timestamptz NOT NULL,
		completed_at timestamptz
	);
	CREATE INDEX IF NOT EXISTS bulks_unfinished ON bulks (created_at) WHERE status <> 'COMPLETED';
	CREATE INDEX IF NOT EXISTS bulks_workflow ON bulks (workflow_id, created_at DESC);`)
	return err
}

// Apply implements Projector.
func (Bulks) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case bulk.Requested:
		filter, err := json.Marshal(e.Filter)
		if err != nil {
			return fmt.Errorf("encode bulk filter: %w", err)
		}
		tx.Exec(`INSERT INTO bulks (id, workspace_id, workflow_id, action, filter, reason, status, matched, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'CREATED', $7, $8, $8) ON CONFLICT (id) DO NOTHING`,
			e.BulkID, e.WorkspaceID, e.WorkflowID, string(e.Action), filter, e.Reason, len(e.RunIDs), e.At)
	case bulk.Progressed:
		done := 0
		for _, r := range e.Results {
			if r.Error == "" {
				done++
			}
		}
		tx.Exec(`UPDATE bulks SET done = done + $2, failed = failed + $3, status = 'RUNNING', updated_at = $4 WHERE id = $1`,
			e.BulkID, done, len(e.Results)-done, e.At)
	case bulk.Completed:
		tx.Exec(`UPDATE bulks SET status = 'COMPLETED', updated_at = $2, completed_at = $2 WHERE id = $1`, e.BulkID, e.At)
	}
	return nil
}

// BulkRow is a bulk as the bulks read model holds it.
type BulkRow struct {
	ID          string      `json:"id"`
	WorkflowID  string      `json:"workflowId"`
	Action      string      `json:"action"`
	Filter      bulk.Filter `json:"filter"`
	Reason      string      `json:"reason"`
	Status      string      `json:"status"`
	Matched     int         `json:"matched"`
	Done        int         `json:"done"`
	Failed      int         `json:"failed"`
	CreatedAt   time.Time   `json:"createdAt"`
	UpdatedAt   time.Time   `json:"updatedAt"`
	CompletedAt *time.Time  `json:"completedAt"`
}

// BulksOf lists a page of a workflow's bulks, newest first, and the total.
func (q *Queries) BulksOf(ctx context.Context, workspaceID, workflowID string, p Page) ([]BulkRow, int, error) {
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM bulks WHERE workspace_id = $1 AND workflow_id = $2`,
		workspaceID, workflowID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count bulks: %w", err)
	}
	rows, err := q.db.Query(ctx, `SELECT id::text, workflow_id, action, filter, reason, status, matched, done, failed,
		created_at, updated_at, completed_at FROM bulks WHERE workspace_id = $1 AND workflow_id = $2
		ORDER BY created_at DESC, id LIMIT $3 OFFSET $4`, workspaceID, workflowID, p.Limit, p.Offset())
	if err != nil {
		return nil, 0, fmt.Errorf("list bulks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BulkRow, error) {
		var x BulkRow
		var filter []byte
		err := r.Scan(&x.ID, &x.WorkflowID, &x.Action, &filter, &x.Reason, &x.Status, &x.Matched, &x.Done, &x.Failed,
			&x.CreatedAt, &x.UpdatedAt, &x.CompletedAt)
		if err == nil {
			err = json.Unmarshal(filter, &x.Filter)
		}
		return x, err
	})
	return list, total, err
}

// UnfinishedBulks lists up to limit bulks not completed, oldest first: the bulks reactor's
// sweep resumes them.
func (q *Queries) UnfinishedBulks(ctx context.Context, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT id::text FROM bulks WHERE status <> 'COMPLETED' ORDER BY created_at LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// MatchRuns lists the ids of the runs m selects, oldest first (commands.RunMatcher).
func (q *Queries) MatchRuns(ctx context.Context, m bulk.Match) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT id::text FROM runs WHERE workspace_id = $1 AND workflow_id = $2
		AND status = ANY($3) AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at < $5)
		ORDER BY created_at, id LIMIT $6`, m.WorkspaceID, m.WorkflowID, m.Statuses, m.CreatedAfter, m.CreatedBefore, m.Limit)
	if err != nil {
		return nil, fmt.Errorf("match runs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
