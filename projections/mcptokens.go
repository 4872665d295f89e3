package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/mcptoken"
	"github.com/switchyard/switchyard/eventstore"
)

// MCPTokens projects MCP tokens, for listing them. Authenticating /v1/mcp does not read this
// table: it folds the token's stream, so a token works the instant it is minted and fails the
// instant it is revoked. The table holds no hash: listing never needs it.
type MCPTokens struct{}

// Name implements Projector.
func (MCPTokens) Name() string { return "mcptokens" }

// Tables implements Projector.
func (MCPTokens) Tables() []string { return []string{"mcp_tokens"} }

// Filter implements Projector.
func (MCPTokens) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(mcptoken.Minted{}, mcptoken.Revoked{})}
}

// Migrate implements Projector.
func (MCPTokens) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS mcp_tokens (
		id           text PRIMARY KEY,
		workspace_id text NOT NULL,
		label        text NOT NULL,
		expires_at   timestamptz,
		revoked_at   timestamptz,
		created_at   timestamptz NOT NULL
	);
	CREATE INDEX IF NOT EXISTS mcp_tokens_workspace ON mcp_tokens (workspace_id, created_at DESC, id);`)
	return err
}

// Apply implements Projector. Every value comes from the event, so a rebuild reproduces the rows.
func (MCPTokens) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case mcptoken.Minted:
		tx.Exec(`INSERT INTO mcp_tokens (id, workspace_id, label, expires_at, created_at)
			VALUES ($1,$2,$3,$4,$5) ON CONFLICT (id) DO NOTHING`,
			e.ID, e.WorkspaceID, e.Label, e.ExpiresAt, e.CreatedAt)
	case mcptoken.Revoked:
		// Only the first revocation counts, as in the aggregate.
		tx.Exec(`UPDATE mcp_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, e.ID, e.RevokedAt)
	}
	return nil
}

// MCPTokenRow is an MCP token as the list shows it: never the token, nor its hash.
type MCPTokenRow struct {
	ID          string     `json:"id"`
	WorkspaceID string     `json:"workspaceId"`
	Label       string     `json:"label"`
	ExpiresAt   *time.Time `json:"expiresAt"`
	RevokedAt   *time.Time `json:"revokedAt"`
	CreatedAt   time.Time  `json:"createdAt"`
}

// MCPTokensOf lists a page of a workspace's MCP tokens, revoked ones included, newest first,
// and the total.
func (q *Queries) MCPTokensOf(ctx context.Context, workspaceID string, p Page) ([]MCPTokenRow, int, error) {
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM mcp_tokens WHERE workspace_id = $1`, workspaceID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count mcp tokens: %w", err)
	}
	rows, err := q.db.Query(ctx, `SELECT id, workspace_id, label, expires_at, revoked_at, created_at FROM mcp_tokens
		WHERE workspace_id = $1 ORDER BY created_at DESC, id LIMIT $2 OFFSET $3`, workspaceID, p.Limit, p.Offset())
	if err != nil {
		return nil, 0, fmt.Errorf("list mcp tokens: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (MCPTokenRow, error) {
		var t MCPTokenRow
		err := r.Scan(&t.ID, &t.WorkspaceID, &t.Label, &t.ExpiresAt, &t.RevokedAt, &t.CreatedAt)
		return t, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list mcp tokens: %w", err)
	}
	if list == nil {
		list = []MCPTokenRow{}
	}
	return list, total, nil
}
