package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/billing"
)

// The lists the workspace console pages through: runs, executions and members of one
// workspace, filtered as the console's forms ask.

// RunFilter narrows a list of runs; empty fields do not filter.
type RunFilter struct {
	Status     string
	WorkflowID string
}

// RunRow is a run as the runs read model holds it, with its workflow's current name ("" once
// the workflow is deleted).
type RunRow struct {
	ID           string    `json:"id"`
	WorkflowID   string    `json:"workflowId"`
	WorkflowName string    `json:"workflowName"`
	Status       string    `json:"status"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// RunsOf lists a page of the workspace's runs, newest first, and the total.
func (q *Queries) RunsOf(ctx context.Context, workspaceID string, f RunFilter, p Page) ([]RunRow, int, error) {
	const where = `r.workspace_id = $1 AND ($2 = '' OR r.status = $2) AND ($3 = '' OR r.workflow_id = $3)`
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM runs r WHERE `+where, workspaceID, f.Status, f.WorkflowID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count runs: %w", err)
	}
	rows, err := q.db.Query(ctx, `SELECT r.id::text, r.workflow_id, coalesce(w.name, ''), r.status, r.created_at, r.updated_at
		FROM runs r LEFT JOIN workflow_list w ON w.id = r.workflow_id
		WHERE `+where+` ORDER BY r.created_at DESC, r.id LIMIT $4 OFFSET $5`,
		workspaceID, f.Status, f.WorkflowID, p.Limit, p.Offset())
	if err != nil {
		return nil, 0, fmt.Errorf("list runs: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RunRow, error) {
		var x RunRow
		err := r.Scan(&x.ID, &x.WorkflowID, &x.WorkflowName, &x.Status, &x.CreatedAt, &x.UpdatedAt)
		return x, err
	})
	return list, total, err
}

// ExecutionFilter narrows a list of executions; empty fields do not filter.
type ExecutionFilter struct {
	Status string
	Module string
	// IDPrefix keeps the executions whose id starts with it (lower-case hex and dashes).
	IDPrefix string
}

// ExecutionRow is an execution as the executions read model holds it.
type ExecutionRow struct {
	ID         string          `json:"id"`
	Module     string          `json:"module"`
	Status     string          `json:"status"`
	Attempt    int             `json:"attempt"`
	Attempts   int             `json:"attempts"`
	CachedFrom string          `json:"cachedFrom,omitempty"`
	TotalUsage billing.Credits `json:"totalUsage"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
	// RunID is the workflow run whose stage the execution ran ("" for an SDK call), with the
	// run's workflow and its current name ("" once deleted).
	RunID        string `json:"runId,omitempty"`
	WorkflowID   string `json:"workflowId,omitempty"`
	WorkflowName string `json:"workflowName,omitempty"`
}

// ExecutionsOf lists a page of the workspace's executions, newest first, and the total.
func (q *Queries) ExecutionsOf(ctx context.Context, workspaceID string, f ExecutionFilter, p Page) ([]ExecutionRow, int, error) {
	const where = `e.workspace_id = $1 AND ($2 = '' OR e.status = $2) AND ($3 = '' OR e.module = $3) AND ($4 = '' OR starts_with(e.id::text, $4))`
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM executions e WHERE `+where, workspaceID, f.Status, f.Module, f.IDPrefix).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count executions: %w", err)
	}
	rows, err := q.db.Query(ctx, `SELECT e.id::text, e.module, e.status, e.attempt, e.attempts, e.cached_from, e.total_usage, e.created_at, e.updated_at,
			e.run_id, coalesce(r.workflow_id, ''), coalesce(w.name, '')
		FROM executions e
		LEFT JOIN runs r ON r.id = CASE WHEN e.run_id <> '' THEN e.run_id::uuid END
		LEFT JOIN workflow_list w ON w.id = r.workflow_id
		WHERE `+where+` ORDER BY e.created_at DESC, e.id LIMIT $5 OFFSET $6`,
		workspaceID, f.Status, f.Module, f.IDPrefix, p.Limit, p.Offset())
	if err != nil {
		return nil, 0, fmt.Errorf("list executions: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ExecutionRow, error) {
		var x ExecutionRow
		var usage int64
		err := r.Scan(&x.ID, &x.Module, &x.Status, &x.Attempt, &x.Attempts, &x.CachedFrom, &usage, &x.CreatedAt, &x.UpdatedAt,
			&x.RunID, &x.WorkflowID, &x.WorkflowName)
		x.TotalUsage = billing.Credits(usage)
		return x, err
	})
	return list, total, err
}

// ModulesUsedBy lists the modules the workspace's executions ran, for the console's filter.
func (q *Queries) ModulesUsedBy(ctx context.Context, workspaceID string) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT DISTINCT module FROM executions WHERE workspace_id = $1 ORDER BY module LIMIT 200`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list modules: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// MemberRow is a member of a workspace.
type MemberRow struct {
	UserID string    `json:"userId"`
	Email  string    `json:"email"`
	Name   string    `json:"name"`
	Role   string    `json:"role"`
	Since  time.Time `json:"since"`
}

// MembersOf lists the workspace's members, owners first, then by email.
func (q *Queries) MembersOf(ctx context.Context, workspaceID string) ([]MemberRow, error) {
	rows, err := q.db.Query(ctx, `SELECT m.user_id, coalesce(u.email, ''), coalesce(u.name, ''), m.role, m.updated_at
		FROM memberships m LEFT JOIN users u ON u.id = m.user_id
		WHERE m.workspace_id = $1
		ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, u.email LIMIT 1000`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (MemberRow, error) {
		var m MemberRow
		err := r.Scan(&m.UserID, &m.Email, &m.Name, &m.Role, &m.Since)
		return m, err
	})
}
