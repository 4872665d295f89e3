package projections

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
)

// WorkflowList is the read model behind the workflow lists (SPEC.md 2.9): one row per live
// workflow. Single workflows are folded from their streams (read-your-writes).
type WorkflowList struct{}

// Name implements Projector.
func (WorkflowList) Name() string { return "workflowlist" }

// Tables implements Projector.
func (WorkflowList) Tables() []string { return []string{"workflow_list"} }

// Filter implements Projector.
func (WorkflowList) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(workflow.Created{}, workflow.Updated{}, workflow.Deleted{})}
}

// Migrate implements Projector.
func (WorkflowList) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS workflow_list (
		id           text PRIMARY KEY,
		workspace_id text NOT NULL,
		name         text NOT NULL,
		created_at   timestamptz NOT NULL
	);
	CREATE INDEX IF NOT EXISTS workflow_list_workspace ON workflow_list (workspace_id, created_at DESC, id);`)
	return err
}

// Apply implements Projector.
func (WorkflowList) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case workflow.Created:
		tx.Exec(`INSERT INTO workflow_list (id, workspace_id, name, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING`,
			e.WorkflowID, e.WorkspaceID, e.Definition.Name, e.At)
	case workflow.Updated:
		tx.Exec(`UPDATE workflow_list SET name = $2 WHERE id = $1`, e.WorkflowID, e.Definition.Name)
	case workflow.Deleted:
		tx.Exec(`DELETE FROM workflow_list WHERE id = $1`, e.WorkflowID)
	}
	return nil
}

// WorkflowListItem is SPEC.md 2.9.
type WorkflowListItem struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// WorkflowsOf lists a page of a workspace's workflows, newest first, and the total.
func (q *Queries) WorkflowsOf(ctx context.Context, workspaceID string, p Page) ([]WorkflowListItem, int, error) {
	return q.WorkflowsIn(ctx, workspaceID, nil, p)
}

// WorkflowsIn is WorkflowsOf limited to the workflows ids lists; an empty ids is no limit (an
// unrestricted API key).
func (q *Queries) WorkflowsIn(ctx context.Context, workspaceID string, ids []string, p Page) ([]WorkflowListItem, int, error) {
	var only []string // NULL in SQL: every workflow
	if len(ids) > 0 {
		only = ids
	}
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM workflow_list WHERE workspace_id = $1 AND ($2::text[] IS NULL OR id = ANY($2))`,
		workspaceID, only).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := q.db.Query(ctx, `SELECT id, name, created_at FROM workflow_list WHERE workspace_id = $1 AND ($4::text[] IS NULL OR id = ANY($4))
		ORDER BY created_at DESC, id LIMIT $2 OFFSET $3`, workspaceID, p.Limit, p.Offset(), only)
	if err != nil {
		return nil, 0, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkflowListItem, error) {
		var w WorkflowListItem
		err := r.Scan(&w.ID, &w.Name, &w.CreatedAt)
		w.CreatedAt = w.CreatedAt.UTC()
		return w, err
	})
	if list == nil {
		list = []WorkflowListItem{}
	}
	return list, total, err
}
