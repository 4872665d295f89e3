package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/eventstore"
)

// Workspaces projects workspaces and their memberships.
type Workspaces struct{}

// Name implements Projector.
func (Workspaces) Name() string { return "workspaces" }

// Tables implements Projector.
func (Workspaces) Tables() []string { return []string{"workspaces", "memberships"} }

// Filter implements Projector.
func (Workspaces) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(workspace.Created{}, workspace.MemberAdded{}, workspace.MemberRoleChanged{}, workspace.MemberRemoved{})}
}

// Migrate implements Projector.
func (Workspaces) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS workspaces (
		id            text PRIMARY KEY,
		name          text NOT NULL,
		owner_user_id text NOT NULL,
		created_at    timestamptz NOT NULL
	);
	CREATE TABLE IF NOT EXISTS memberships (
		workspace_id text NOT NULL,
		user_id      text NOT NULL,
		role         text NOT NULL,
		updated_at   timestamptz NOT NULL,
		PRIMARY KEY (workspace_id, user_id)
	);
	CREATE INDEX IF NOT EXISTS memberships_user ON memberships (user_id);`)
	return err
}

// Apply implements Projector.
func (Workspaces) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case workspace.Created:
		tx.Exec(`INSERT INTO workspaces (id, name, owner_user_id, created_at) VALUES ($1,$2,$3,$4)
			ON CONFLICT (id) DO NOTHING`, e.WorkspaceID, e.Name, e.OwnerUserID, e.At)
	case workspace.MemberAdded:
		tx.Exec(`INSERT INTO memberships (workspace_id, user_id, role, updated_at) VALUES ($1,$2,$3,$4)
			ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = EXCLUDED.role, updated_at = EXCLUDED.updated_at`,
			e.WorkspaceID, e.UserID, e.Role, e.At)
	case workspace.MemberRoleChanged:
		tx.Exec(`UPDATE memberships SET role = $3, updated_at = $4 WHERE workspace_id = $1 AND user_id = $2`,
			e.WorkspaceID, e.UserID, e.Role, e.At)
	case workspace.MemberRemoved:
		tx.Exec(`DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2`, e.WorkspaceID, e.UserID)
	}
	return nil
}

// WorkspaceRow is a workspace as the read model holds it; Role is the asking user's role when
// listed for a user.
type WorkspaceRow struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	OwnerUserID string    `json:"ownerUserId"`
	CreatedAt   time.Time `json:"createdAt"`
	Role        string    `json:"role,omitempty"`
}

// Workspace finds a workspace by id.
func (q *Queries) Workspace(ctx context.Context, id string) (WorkspaceRow, error) {
	var w WorkspaceRow
	err := q.db.QueryRow(ctx, `SELECT id, name, owner_user_id, created_at FROM workspaces WHERE id = $1`, id).
		Scan(&w.ID, &w.Name, &w.OwnerUserID, &w.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, fmt.Errorf("workspace %s: %w", id, domain.ErrNotFound)
	}
	return w, err
}

// WorkspacesOfUser lists the workspaces a user is a member of, with the user's role.
func (q *Queries) WorkspacesOfUser(ctx context.Context, userID string) ([]WorkspaceRow, error) {
	rows, err := q.db.Query(ctx, `SELECT w.id, w.name, w.owner_user_id, w.created_at, m.role
		FROM memberships m JOIN workspaces w ON w.id = m.workspace_id
		WHERE m.user_id = $1 ORDER BY w.name, w.id`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkspaceRow, error) {
		var w WorkspaceRow
		return w, r.Scan(&w.ID, &w.Name, &w.OwnerUserID, &w.CreatedAt, &w.Role)
	})
}

// MemberRole returns the user's role in the workspace, or ErrNotFound.
func (q *Queries) MemberRole(ctx context.Context, workspaceID, userID string) (string, error) {
	var role string
	err := q.db.QueryRow(ctx, `SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("membership: %w", domain.ErrNotFound)
	}
	return role, err
}

// CountWorkspaces counts all workspaces.
func (q *Queries) CountWorkspaces(ctx context.Context) (int, error) {
	var n int
	err := q.db.QueryRow(ctx, `SELECT count(*) FROM workspaces`).Scan(&n)
	return n, err
}
