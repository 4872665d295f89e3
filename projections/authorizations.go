package projections

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/authorization"
	"github.com/switchyard/switchyard/eventstore"
)

// Authorizations projects OAuth authorizations for the connected-apps page. Token checks never
// read this table: they fold the authorization's stream, so a revocation is effective at once.
type Authorizations struct{}

// Name implements Projector.
func (Authorizations) Name() string { return "authorizations" }

// Tables implements Projector.
func (Authorizations) Tables() []string { return []string{"authorizations"} }

// Filter implements Projector.
func (Authorizations) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(authorization.Granted{}, authorization.CodeRedeemed{}, authorization.RefreshRotated{}, authorization.Revoked{})}
}

// Migrate implements Projector.
func (Authorizations) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS authorizations (
		id            text PRIMARY KEY,
		user_id       text NOT NULL,
		client_id     text NOT NULL,
		workspace_id  text NOT NULL,
		scopes        text[] NOT NULL,
		granted_at    timestamptz NOT NULL,
		last_used_at  timestamptz,
		revoked_at    timestamptz,
		revoke_reason text NOT NULL DEFAULT ''
	);
	CREATE INDEX IF NOT EXISTS authorizations_workspace ON authorizations (workspace_id, granted_at DESC);
	CREATE INDEX IF NOT EXISTS authorizations_consent ON authorizations (user_id, client_id, workspace_id) WHERE revoked_at IS NULL;`)
	return err
}

// Apply implements Projector.
func (Authorizations) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case authorization.Granted:
		tx.Exec(`INSERT INTO authorizations (id, user_id, client_id, workspace_id, scopes, granted_at) VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT (id) DO NOTHING`, e.ID, e.UserID, e.ClientID, e.WorkspaceID, e.Scopes, e.At)
	case authorization.CodeRedeemed:
		tx.Exec(`UPDATE authorizations SET last_used_at = $2 WHERE id = $1`, e.ID, e.At)
	case authorization.RefreshRotated:
		tx.Exec(`UPDATE authorizations SET last_used_at = $2 WHERE id = $1`, e.ID, e.At)
	case authorization.Revoked:
		tx.Exec(`UPDATE authorizations SET revoked_at = $2, revoke_reason = $3 WHERE id = $1 AND revoked_at IS NULL`, e.ID, e.At, e.Reason)
	}
	return nil
}

// AuthorizationRow is an authorization with the names the connected-apps page shows.
type AuthorizationRow struct {
	ID           string     `json:"id"`
	UserID       string     `json:"userId"`
	UserEmail    string     `json:"userEmail"`
	ClientID     string     `json:"clientId"`
	AppName      string     `json:"appName"`
	AppLogoURL   string     `json:"appLogoUrl"`
	WorkspaceID  string     `json:"workspaceId"`
	Scopes       []string   `json:"scopes"`
	GrantedAt    time.Time  `json:"grantedAt"`
	LastUsedAt   *time.Time `json:"lastUsedAt"`
	RevokedAt    *time.Time `json:"revokedAt"`
	RevokeReason string     `json:"revokeReason,omitempty"`
}

// AuthorizationsOfWorkspace lists a page of a workspace's live authorizations, newest first,
// and their total.
func (q *Queries) AuthorizationsOfWorkspace(ctx context.Context, workspaceID string, p Page) ([]AuthorizationRow, int, error) {
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM authorizations WHERE workspace_id = $1 AND revoked_at IS NULL`, workspaceID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := q.db.Query(ctx, `SELECT z.id, z.user_id, coalesce(u.email, ''), z.client_id, coalesce(a.name, ''), coalesce(a.logo_url, ''),
			z.workspace_id, z.scopes, z.granted_at, z.last_used_at, z.revoked_at, z.revoke_reason
		FROM authorizations z LEFT JOIN apps a ON a.client_id = z.client_id LEFT JOIN users u ON u.id = z.user_id
		WHERE z.workspace_id = $1 AND z.revoked_at IS NULL ORDER BY z.granted_at DESC, z.id LIMIT $2 OFFSET $3`, workspaceID, p.Limit, p.Offset())
	if err != nil {
		return nil, 0, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuthorizationRow, error) {
		var a AuthorizationRow
		return a, r.Scan(&a.ID, &a.UserID, &a.UserEmail, &a.ClientID, &a.AppName, &a.AppLogoURL, &a.WorkspaceID, &a.Scopes,
			&a.GrantedAt, &a.LastUsedAt, &a.RevokedAt, &a.RevokeReason)
	})
	if list == nil {
		list = []AuthorizationRow{}
	}
	return list, total, err
}

// LiveAuthorizationIDs lists the unrevoked authorizations of one (user, app, workspace).
func (q *Queries) LiveAuthorizationIDs(ctx context.Context, userID, clientID, workspaceID string) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT id FROM authorizations WHERE user_id = $1 AND client_id = $2 AND workspace_id = $3 AND revoked_at IS NULL`,
		userID, clientID, workspaceID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// LiveAuthorizationIDsOfApp lists the unrevoked authorizations of an app.
func (q *Queries) LiveAuthorizationIDsOfApp(ctx context.Context, clientID string) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT id FROM authorizations WHERE client_id = $1 AND revoked_at IS NULL`, clientID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
