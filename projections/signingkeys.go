package projections

import (
	"context"

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
