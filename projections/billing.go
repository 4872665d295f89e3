package projections

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
)

// Billing projects balances (SPEC.md 2.8) and the billing history of each workspace.
type Billing struct{}

// Name implements Projector.
func (Billing) Name() string { return "billing" }

// Tables implements Projector.
func (Billing) Tables() []string { return []string{"balances", "billing_transactions"} }

// Filter implements Projector.
func (Billing) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(billing.CreditsPurchased{}, billing.PlanRenewed{}, billing.CreditsCharged{})}
}

// Migrate implements Projector. Amounts are millicredits (billing.Credits).
func (Billing) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS balances (
		workspace_id text PRIMARY KEY,
		credit       bigint NOT NULL DEFAULT 0,
		usage        bigint NOT NULL DEFAULT 0,
		revision     bigint NOT NULL,
		updated_at   timestamptz NOT NULL
	);
	CREATE TABLE IF NOT EXISTS billing_transactions (
		id           uuid PRIMARY KEY,
		workspace_id text NOT NULL,
		revision     bigint NOT NULL,
		kind         text NOT NULL,
		amount       bigint NOT NULL,
		credit_delta bigint NOT NULL,
		usage_delta  bigint NOT NULL,
		credit_after bigint NOT NULL,
		usage_after  bigint NOT NULL,
		reference    text NOT NULL DEFAULT '',
		occurred_at  timestamptz NOT NULL,
		UNIQUE (workspace_id, revision)
	);`)
	return err
}

// Transaction kinds in the billing history.
const (
	KindTopUp   = "topup"
	KindRenewal = "renewal"
	KindCharge  = "charge"
)

// Apply implements Projector. The balance update and the history row go in one pipelined
// batch; the history row reads the balance the update just wrote.
func (Billing) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	var ws, kind, ref string
	var amount, creditDelta billing.Credits
	var usageSet *billing.Credits
	var usageDelta billing.Credits
	var at time.Time
	switch e := e.(type) {
	case billing.CreditsPurchased:
		ws, kind, ref, amount, creditDelta, at = e.WorkspaceID, KindTopUp, e.Reference, e.Amount, e.Amount, e.At
	case billing.PlanRenewed:
		ws, kind, amount, at = e.WorkspaceID, KindRenewal, e.Included, e.At
		usageSet, usageDelta = &e.Included, e.Included-e.Lapsed
	case billing.CreditsCharged:
		ws, kind, ref, amount, at = e.WorkspaceID, KindCharge, e.Cause, e.Amount, e.At
		creditDelta, usageDelta = -e.FromCredit, -e.FromUsage
	default:
		return nil
	}
	if usageSet != nil {
		tx.Exec(`INSERT INTO balances (workspace_id, credit, usage, revision, updated_at) VALUES ($1, 0, $2, $3, $4)
			ON CONFLICT (workspace_id) DO UPDATE SET usage = EXCLUDED.usage, revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at`,
			ws, int64(*usageSet), int64(ev.Revision), at)
	} else {
		tx.Exec(`INSERT INTO balances (workspace_id, credit, usage, revision, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (workspace_id) DO UPDATE SET credit = balances.credit + EXCLUDED.credit,
				usage = balances.usage + EXCLUDED.usage, revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at`,
			ws, int64(creditDelta), int64(usageDelta), int64(ev.Revision), at)
	}
	tx.Exec(`INSERT INTO billing_transactions (id, workspace_id, revision, kind, amount, credit_delta, usage_delta,
			credit_after, usage_after, reference, occurred_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, b.credit, b.usage, $8, $9 FROM balances b WHERE b.workspace_id = $2
		ON CONFLICT (id) DO NOTHING`,
		ev.ID, ws, int64(ev.Revision), kind, int64(amount), int64(creditDelta), int64(usageDelta), ref, at)
	return nil
}

// Balance is a workspace's balance (SPEC.md 2.8).
type Balance struct {
	Credit billing.Credits `json:"credit"`
	Usage  billing.Credits `json:"usage"`
	Total  billing.Credits `json:"total"`
}

// BalanceOf reads a workspace's balance; a workspace with no billing events has zeros.
func (q *Queries) BalanceOf(ctx context.Context, workspaceID string) (Balance, int64, error) {
	var credit, usage int64
	rev := int64(-1)
	err := q.db.QueryRow(ctx, `SELECT credit, usage, revision FROM balances WHERE workspace_id = $1`, workspaceID).Scan(&credit, &usage, &rev)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Balance{}, 0, err
	}
	return Balance{Credit: billing.Credits(credit), Usage: billing.Credits(usage), Total: billing.Credits(credit + usage)}, rev, nil
}

// Transaction is one entry of the billing history.
type Transaction struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Amount      billing.Credits `json:"amount"`
	CreditDelta billing.Credits `json:"creditDelta"`
	UsageDelta  billing.Credits `json:"usageDelta"`
	CreditAfter billing.Credits `json:"creditAfter"`
	UsageAfter  billing.Credits `json:"usageAfter"`
	Reference   string          `json:"reference"`
	OccurredAt  time.Time       `json:"occurredAt"`
	Revision    int64           `json:"-"`
}

// Transactions lists a page of the workspace's billing history, newest first, and the total.
func (q *Queries) Transactions(ctx context.Context, workspaceID string, p Page) ([]Transaction, int, error) {
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM billing_transactions WHERE workspace_id = $1`, workspaceID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := q.db.Query(ctx, `SELECT id::text, kind, amount, credit_delta, usage_delta, credit_after, usage_after, reference, occurred_at, revision
		FROM billing_transactions WHERE workspace_id = $1 ORDER BY revision DESC LIMIT $2 OFFSET $3`, workspaceID, p.Limit, p.Offset())
	if err != nil {
		return nil, 0, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Transaction, error) {
		var t Transaction
		var amount, cd, ud, ca, ua int64
		err := r.Scan(&t.ID, &t.Kind, &amount, &cd, &ud, &ca, &ua, &t.Reference, &t.OccurredAt, &t.Revision)
		t.Amount, t.CreditDelta, t.UsageDelta, t.CreditAfter, t.UsageAfter = billing.Credits(amount), billing.Credits(cd), billing.Credits(ud), billing.Credits(ca), billing.Credits(ua)
		return t, err
	})
	return list, total, err
}

// All is every projector of the service, in the order they are migrated.
func All() []Projector {
	return []Projector{Users{}, Workspaces{}, Billing{}}
}
