package projections

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/signingkey"
	"github.com/switchyard/switchyard/eventstore"
)

// SigningKeys projects the token signing keys, so every serve process finds the key ring
// (including keys another process or `admin keys rotate` created) with one query.
type SigningKeys struct{}

// Name implements Projector.
func (SigningKeys) Name() string { return "signingkeys" }

// Tables implements Projector.
func (SigningKeys) Tables() []string { return []string{"signing_keys"} }

// Filter implements Projector.
func (SigningKeys) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(signingkey.Created{})}
}

// Migrate implements Projector.
func (SigningKeys) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS signing_keys (
		kid         text PRIMARY KEY,
		alg         text NOT NULL,
		n           text NOT NULL,
		e           text NOT NULL,
		private_key text NOT NULL,
		created_at  timestamptz NOT NULL
	);`)
	return err
}

// Apply implements Projector.
func (SigningKeys) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	if k, ok := e.(signingkey.Created); ok {
		tx.Exec(`INSERT INTO signing_keys (kid, alg, n, e, private_key, created_at) VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (kid) DO NOTHING`,
			k.KID, k.Alg, k.N, k.E, k.PrivateKey, k.At)
	}
	return nil
}

// SigningKeys lists every signing key, oldest first; the private key is still sealed.
func (q *Queries) SigningKeys(ctx context.Context) ([]signingkey.Created, error) {
	rows, err := q.db.Query(ctx, `SELECT kid, alg, n, e, private_key, created_at FROM signing_keys ORDER BY created_at, kid`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (signingkey.Created, error) {
		var k signingkey.Created
		err := r.Scan(&k.KID, &k.Alg, &k.N, &k.E, &k.PrivateKey, &k.At)
		k.At = k.At.UTC()
		return k, err
	})
}

// WorkflowList is the read model behind GET /v1/workspaces/{id}/workflows (SPEC.md 2.9). The
// workflow aggregate arrives with the workflows issue, which fills this table from its events;
// until then the table exists, is queried for real, and is empty.
type WorkflowList struct{}

// Name implements Projector.
func (WorkflowList) Name() string { return "workflowlist" }

// Tables implements Projector.
func (WorkflowList) Tables() []string { return []string{"workflow_list"} }

// Filter implements Projector. No event type is registered yet under this name, so nothing is
// delivered; the zero Filter would select every event.
func (WorkflowList) Filter() eventstore.Filter {
	return eventstore.Filter{Types: []string{"WorkflowCreated"}}
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

// Apply implements Projector: nothing to apply until the workflow events exist.
func (WorkflowList) Apply(context.Context, *Tx, eventstore.RecordedEvent) error { return nil }

// WorkflowListItem is SPEC.md 2.9.
type WorkflowListItem struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// WorkflowsOf lists a page of a workspace's workflows, newest first, and the total.
func (q *Queries) WorkflowsOf(ctx context.Context, workspaceID string, p Page) ([]WorkflowListItem, int, error) {
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM workflow_list WHERE workspace_id = $1`, workspaceID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := q.db.Query(ctx, `SELECT id, name, created_at FROM workflow_list WHERE workspace_id = $1
		ORDER BY created_at DESC, id LIMIT $2 OFFSET $3`, workspaceID, p.Limit, p.Offset())
	if err != nil {
		return nil, 0, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkflowListItem, error) {
		var w WorkflowListItem
		return w, r.Scan(&w.ID, &w.Name, &w.CreatedAt)
	})
	if list == nil {
		list = []WorkflowListItem{}
	}
	return list, total, err
}
