package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/apikey"
	"github.com/switchyard/switchyard/eventstore"
)

// APIKeys projects workspace API keys, for listing them. Request authentication does not read
// this table: it folds the key's stream, so a key works the instant it is created.
type APIKeys struct{}

// Name implements Projector.
func (APIKeys) Name() string { return "apikeys" }

// Tables implements Projector.
func (APIKeys) Tables() []string { return []string{"api_keys"} }

// Filter implements Projector.
func (APIKeys) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(apikey.Created{}, apikey.Revoked{})}
}

// Migrate implements Projector.
func (APIKeys) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS api_keys (
		id                   text PRIMARY KEY,
		workspace_id         text NOT NULL,
		key_hash             text NOT NULL,
		public_key           text NOT NULL,
		label                text NOT NULL,
		allowed_workflow_ids text[] NOT NULL DEFAULT '{}',
		expires_at           timestamptz,
		revoked_at           timestamptz,
		revoke_reason        text NOT NULL DEFAULT '',
		created_at           timestamptz NOT NULL
	);
	CREATE INDEX IF NOT EXISTS api_keys_workspace ON api_keys (workspace_id, created_at DESC, id);`)
	return err
}

// Apply implements Projector. Every value comes from the event, so a rebuild reproduces the rows.
func (APIKeys) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case apikey.Created:
		allowed := e.AllowedWorkflowIDs
		if allowed == nil {
			allowed = []string{}
		}
		tx.Exec(`INSERT INTO api_keys (id, workspace_id, key_hash, public_key, label, allowed_workflow_ids, expires_at, created_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (id) DO NOTHING`,
			e.ID, e.WorkspaceID, e.KeyHash, e.PublicKey, e.Label, allowed, e.ExpiresAt, e.At)
	case apikey.Revoked:
		// Only the first revocation counts, as in the aggregate.
		tx.Exec(`UPDATE api_keys SET revoked_at = $2, revoke_reason = $3 WHERE id = $1 AND revoked_at IS NULL`,
			e.ID, e.At, e.Reason)
	}
	return nil
}

// APIKeyRow is an API key as the read model holds it. Neither the key nor its secret is here:
// only the hash of the key, which is not shown.
type APIKeyRow struct {
	ID                 string     `json:"id"`
	WorkspaceID        string     `json:"workspaceId"`
	KeyHash            string     `json:"-"`
	PublicKey          string     `json:"publicKey"`
	Label              string     `json:"label"`
	AllowedWorkflowIDs []string   `json:"allowedWorkflowIds"`
	ExpiresAt          *time.Time `json:"expiresAt"`
	RevokedAt          *time.Time `json:"revokedAt"`
	RevokeReason       string     `json:"revokeReason,omitempty"`
	CreatedAt          time.Time  `json:"createdAt"`
}

const apiKeyColumns = `id, workspace_id, key_hash, public_key, label, allowed_workflow_ids, expires_at, revoked_at, revoke_reason, created_at`

func scanAPIKey(row pgx.Row) (APIKeyRow, error) {
	var k APIKeyRow
	err := row.Scan(&k.ID, &k.WorkspaceID, &k.KeyHash, &k.PublicKey, &k.Label, &k.AllowedWorkflowIDs,
		&k.ExpiresAt, &k.RevokedAt, &k.RevokeReason, &k.CreatedAt)
	if k.AllowedWorkflowIDs == nil {
		k.AllowedWorkflowIDs = []string{}
	}
	return k, err
}

// APIKeyByID finds a key by id.
func (q *Queries) APIKeyByID(ctx context.Context, id string) (APIKeyRow, error) {
	k, err := scanAPIKey(q.db.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return k, fmt.Errorf("api key %s: %w", id, domain.ErrNotFound)
	}
	return k, err
}

// APIKeysOf lists a page of a workspace's keys, revoked ones included, newest first, and the total.
func (q *Queries) APIKeysOf(ctx context.Context, workspaceID string, p Page) ([]APIKeyRow, int, error) {
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE workspace_id = $1`, workspaceID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := q.db.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE workspace_id = $1
		ORDER BY created_at DESC, id LIMIT $2 OFFSET $3`, workspaceID, p.Limit, p.Offset())
	if err != nil {
		return nil, 0, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKeyRow, error) { return scanAPIKey(r) })
	if list == nil {
		list = []APIKeyRow{}
	}
	return list, total, err
}

// ActiveAPIKeys counts the workspace's keys that are neither revoked nor expired at now.
func (q *Queries) ActiveAPIKeys(ctx context.Context, workspaceID string, now time.Time) (int, error) {
	var n int
	err := q.db.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE workspace_id = $1 AND revoked_at IS NULL
		AND (expires_at IS NULL OR expires_at > $2)`, workspaceID, now).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count active api keys: %w", err)
	}
	return n, nil
}
