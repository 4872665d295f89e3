package projections

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
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

// billingEntry is what one billing event does to its workspace's balance and history.
type billingEntry struct {
	ws, kind, ref string
	amount        billing.Credits
	creditDelta   billing.Credits
	usageDelta    billing.Credits
	usageSet      *billing.Credits // a renewal sets the included balance rather than adding to it
	at            time.Time
}

// billingEntryOf decodes a billing event; ok is false for an event type the projector ignores.
func billingEntryOf(ev eventstore.RecordedEvent) (en billingEntry, ok bool, err error) {
	e, err := decode(ev)
	if err != nil {
		return en, false, err
	}
	switch e := e.(type) {
	case billing.CreditsPurchased:
		en = billingEntry{ws: e.WorkspaceID, kind: KindTopUp, ref: e.Reference, amount: e.Amount, creditDelta: e.Amount, at: e.At}
	case billing.PlanRenewed:
		en = billingEntry{ws: e.WorkspaceID, kind: KindRenewal, amount: e.Included, usageSet: &e.Included, usageDelta: e.Included - e.Lapsed, at: e.At}
	case billing.CreditsCharged:
		en = billingEntry{ws: e.WorkspaceID, kind: KindCharge, ref: e.Cause, amount: e.Amount, creditDelta: -e.FromCredit, usageDelta: -e.FromUsage, at: e.At}
	default:
		return en, false, nil
	}
	return en, true, nil
}

// Apply implements Projector. The balance update and the history row go in one pipelined
// batch; the history row reads the balance the update just wrote.
func (Billing) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	en, ok, err := billingEntryOf(ev)
	if err != nil || !ok {
		return err
	}
	if en.usageSet != nil {
		tx.Exec(`INSERT INTO balances (workspace_id, credit, usage, revision, updated_at) VALUES ($1, 0, $2, $3, $4)
			ON CONFLICT (workspace_id) DO UPDATE SET usage = EXCLUDED.usage, revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at`,
			en.ws, int64(*en.usageSet), int64(ev.Revision), en.at)
	} else {
		tx.Exec(`INSERT INTO balances (workspace_id, credit, usage, revision, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (workspace_id) DO UPDATE SET credit = balances.credit + EXCLUDED.credit,
				usage = balances.usage + EXCLUDED.usage, revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at`,
			en.ws, int64(en.creditDelta), int64(en.usageDelta), int64(ev.Revision), en.at)
	}
	tx.Exec(`INSERT INTO billing_transactions (id, workspace_id, revision, kind, amount, credit_delta, usage_delta,
			credit_after, usage_after, reference, occurred_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, b.credit, b.usage, $8, $9 FROM balances b WHERE b.workspace_id = $2
		ON CONFLICT (id) DO NOTHING`,
		ev.ID, en.ws, int64(ev.Revision), en.kind, int64(en.amount), int64(en.creditDelta), int64(en.usageDelta), en.ref, en.at)
	return nil
}

// ApplyBatch implements batchApplier: the same rows as Apply event by event, written by one
// set-based statement per batch (billingBatchSQL) instead of two statements per event, which is
// what lets a rebuild of a long billing log run at tens of thousands of events a second. The
// running balances are summed by the server from the balances the table held before the
// batch, so the batch reads nothing first and the live projector's batch stays one round trip.
func (Billing) ApplyBatch(ctx context.Context, tx *Tx, events []eventstore.RecordedEvent) error {
	n := len(events)
	var (
		ids                     = make([]uuid.UUID, 0, n)
		wss, kinds, refs        = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		revs, amounts, cds, uds = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
		usets                   = make([]*int64, 0, n)
		ats                     = make([]time.Time, 0, n)
	)
	for _, ev := range events {
		en, ok, err := billingEntryOf(ev)
		if err != nil {
			return eventError(ev, err)
		}
		if !ok {
			continue
		}
		var uset *int64
		if en.usageSet != nil {
			v := int64(*en.usageSet)
			uset = &v
		}
		ids, wss, kinds, refs = append(ids, ev.ID), append(wss, en.ws), append(kinds, en.kind), append(refs, en.ref)
		revs, amounts = append(revs, int64(ev.Revision)), append(amounts, int64(en.amount))
		cds, uds, usets = append(cds, int64(en.creditDelta)), append(uds, int64(en.usageDelta)), append(usets, uset)
		ats = append(ats, en.at)
	}
	if len(ids) == 0 {
		return nil
	}
	tx.Exec(billingBatchSQL, ids, wss, revs, kinds, amounts, cds, uds, usets, refs, ats)
	return nil
}

// billingBatchSQL writes a batch of billing entries ($1..$10, one array element per entry, in
// log order; $8 is the included balance a renewal sets, NULL for other entries): every history
// row with the balances after it, then each workspace's last balance. Apply's rules, as sums:
// credit after an entry is the balance before the batch plus the credit deltas so far; a
// renewal sets usage, so it starts a segment, and usage after an entry is the segment's start
// (the balance before the batch, or the renewal's included amount) plus the usage deltas of
// the segment's other entries so far. Both inserts read the balances as they were when the
// statement began.
const billingBatchSQL = `WITH e AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[],
        $8::bigint[], $9::text[], $10::timestamptz[]) WITH ORDINALITY AS e(id, ws, rev, kind, amount, cd, ud, uset, ref, at, ord)
), base AS (
    SELECT w.ws, coalesce(b.credit, 0) AS credit, coalesce(b.usage, 0) AS usage
    FROM (SELECT DISTINCT ws FROM e) w LEFT JOIN balances b ON b.workspace_id = w.ws
), seg AS (
    SELECT e.*, count(e.uset) OVER w AS segno, sum(e.cd) OVER w AS cdsum
    FROM e WINDOW w AS (PARTITION BY e.ws ORDER BY e.ord)
), run AS (
    SELECT s.*,
        (b.credit + s.cdsum)::bigint AS credit_after,
        (CASE WHEN s.segno = 0 THEN b.usage ELSE first_value(s.uset) OVER w END
            + sum(CASE WHEN s.uset IS NULL THEN s.ud ELSE 0 END) OVER w)::bigint AS usage_after
    FROM seg s JOIN base b ON b.ws = s.ws
    WINDOW w AS (PARTITION BY s.ws, s.segno ORDER BY s.ord)
), hist AS (
    INSERT INTO billing_transactions (id, workspace_id, revision, kind, amount, credit_delta, usage_delta,
        credit_after, usage_after, reference, occurred_at)
    SELECT id, ws, rev, kind, amount, cd, ud, credit_after, usage_after, ref, at FROM run ORDER BY ord
    ON CONFLICT (id) DO NOTHING
)
INSERT INTO balances (workspace_id, credit, usage, revision, updated_at)
SELECT DISTINCT ON (ws) ws, credit_after, usage_after, rev, at FROM run ORDER BY ws, ord DESC
ON CONFLICT (workspace_id) DO UPDATE SET credit = EXCLUDED.credit, usage = EXCLUDED.usage,
    revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at`

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
	return []Projector{Users{}, Workspaces{}, Billing{}, Executions{}, APIKeys{}, Webhooks{},
		Apps{}, Authorizations{}, SigningKeys{}, WorkflowList{}, Runs{}, MCPTokens{}, RunNotify{}, Bulks{}, Modules{},
		EventTriggers{}, DebounceWindows{}}
}
