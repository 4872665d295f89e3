package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/eventstore"
)

// Apps projects OAuth app registrations for the developer dashboard and the review queue. The
// OAuth flow itself never reads this table: it folds the app's stream, so an approval or a
// revert takes effect at once.
type Apps struct{}

// Name implements Projector.
func (Apps) Name() string { return "apps" }

// Tables implements Projector.
func (Apps) Tables() []string { return []string{"apps"} }

// Filter implements Projector.
func (Apps) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(app.Registered{}, app.Updated{}, app.Submitted{}, app.Approved{}, app.Reverted{}, app.SecretIssued{}, app.ReturnedToDraft{})}
}

// Migrate implements Projector.
func (Apps) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS apps (
		client_id     text PRIMARY KEY,
		owner_user_id text NOT NULL,
		public        boolean NOT NULL,
		name          text NOT NULL,
		description   text NOT NULL,
		logo_url      text NOT NULL,
		redirect_uris text[] NOT NULL,
		scopes        text[] NOT NULL,
		status        text NOT NULL,
		has_secret    boolean NOT NULL DEFAULT false,
		created_at    timestamptz NOT NULL,
		updated_at    timestamptz NOT NULL
	);
	CREATE INDEX IF NOT EXISTS apps_owner ON apps (owner_user_id, created_at);
	CREATE INDEX IF NOT EXISTS apps_status ON apps (status, updated_at);`)
	return err
}

// Apply implements Projector.
func (Apps) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case app.Registered:
		m := e.Metadata
		tx.Exec(`INSERT INTO apps (client_id, owner_user_id, public, name, description, logo_url, redirect_uris, scopes, status, created_at, updated_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$10) ON CONFLICT (client_id) DO NOTHING`,
			e.ClientID, e.OwnerUserID, e.Public, m.Name, m.Description, m.LogoURL, m.RedirectURIs, m.Scopes, app.StatusDraft, e.At)
	case app.Updated:
		m := e.Metadata
		tx.Exec(`UPDATE apps SET name=$2, description=$3, logo_url=$4, redirect_uris=$5, scopes=$6, updated_at=$7 WHERE client_id=$1`,
			e.ClientID, m.Name, m.Description, m.LogoURL, m.RedirectURIs, m.Scopes, e.At)
	case app.Submitted:
		tx.Exec(`UPDATE apps SET status=$2, updated_at=$3 WHERE client_id=$1`, e.ClientID, app.StatusSubmitted, e.At)
	case app.Approved:
		tx.Exec(`UPDATE apps SET status=$2, updated_at=$3 WHERE client_id=$1`, e.ClientID, app.StatusApproved, e.At)
	case app.Reverted:
		tx.Exec(`UPDATE apps SET status=$2, has_secret=false, updated_at=$3 WHERE client_id=$1`, e.ClientID, app.StatusDraft, e.At)
	case app.ReturnedToDraft:
		tx.Exec(`UPDATE apps SET status=$2, updated_at=$3 WHERE client_id=$1`, e.ClientID, app.StatusDraft, e.At)
	case app.SecretIssued:
		tx.Exec(`UPDATE apps SET has_secret=true, updated_at=$2 WHERE client_id=$1`, e.ClientID, e.At)
	}
	return nil
}

// AppRow is an app registration as the read model holds it.
type AppRow struct {
	ClientID     string    `json:"clientId"`
	OwnerUserID  string    `json:"ownerUserId"`
	Public       bool      `json:"public"`
	Name         string    `json:"name"`
	Description  string    `json:"description"`
	LogoURL      string    `json:"logoUrl"`
	RedirectURIs []string  `json:"redirectUris"`
	Scopes       []string  `json:"scopes"`
	Status       string    `json:"status"`
	HasSecret    bool      `json:"hasSecret"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

const appColumns = `client_id, owner_user_id, public, name, description, logo_url, redirect_uris, scopes, status, has_secret, created_at, updated_at`

func scanApp(row pgx.Row) (AppRow, error) {
	var a AppRow
	err := row.Scan(&a.ClientID, &a.OwnerUserID, &a.Public, &a.Name, &a.Description, &a.LogoURL, &a.RedirectURIs, &a.Scopes,
		&a.Status, &a.HasSecret, &a.CreatedAt, &a.UpdatedAt)
	return a, err
}

func (q *Queries) apps(ctx context.Context, where string, args ...any) ([]AppRow, error) {
	rows, err := q.db.Query(ctx, `SELECT `+appColumns+` FROM apps `+where, args...)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppRow, error) { return scanApp(r) })
	if list == nil {
		list = []AppRow{}
	}
	return list, err
}

// AppsOfOwner lists a developer's apps, oldest first.
func (q *Queries) AppsOfOwner(ctx context.Context, userID string) ([]AppRow, error) {
	return q.apps(ctx, `WHERE owner_user_id = $1 ORDER BY created_at, client_id`, userID)
}

// AppsWithStatus lists apps in a status (the review queue is "submitted"), longest waiting first.
func (q *Queries) AppsWithStatus(ctx context.Context, status string) ([]AppRow, error) {
	return q.apps(ctx, `WHERE status = $1 ORDER BY updated_at, client_id`, status)
}

// AppByID finds an app by client id.
func (q *Queries) AppByID(ctx context.Context, clientID string) (AppRow, error) {
	a, err := scanApp(q.db.QueryRow(ctx, `SELECT `+appColumns+` FROM apps WHERE client_id = $1`, clientID))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("app %s: %w", clientID, domain.ErrNotFound)
	}
	return a, err
}
