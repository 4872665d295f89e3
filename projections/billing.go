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

// ApplyBatch implements batchApplier: the same rows as Apply event by event, written with three
// set-based statements per batch (read the batch's balances, insert every history row, upsert
// every balance) instead of two statements per event, which is what lets a rebuild of a long
// billing log run at tens of thousands of events a second. The running balances are folded in
// Go, in log order, from the balances the table held before the batch.
func (Billing) ApplyBatch(ctx context.Context, tx *Tx, events []eventstore.RecordedEvent) error {
	entries := make([]billingEntry, len(events))
	keep := make([]bool, len(events))
	var workspaces []string
	type bal struct {
		credit, usage billing.Credits
		revision      int64
		at            time.Time
	}
	balances := map[string]*bal{}
	for i, ev := range events {
		en, ok, err := billingEntryOf(ev)
		if err != nil {
			return eventError(ev, err)
		}
		if !ok {
			continue
		}
		entries[i], keep[i] = en, true
		if _, seen := balances[en.ws]; !seen {
			balances[en.ws] = &bal{}
			workspaces = append(workspaces, en.ws)
		}
	}
	if len(workspaces) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT workspace_id, credit, usage FROM balances WHERE workspace_id = ANY($1)`, workspaces)
	if err != nil {
		return err
	}
	for rows.Next() {
		var ws string
		var credit, usage int64
		if err := rows.Scan(&ws, &credit, &usage); err != nil {
			rows.Close()
			return err
		}
		balances[ws].credit, balances[ws].usage = billing.Credits(credit), billing.Credits(usage)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	n := len(events)
	var (
		ids, wss, kinds, refs                   = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		revs, amounts, cds, uds, cafter, uafter = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
		ats                                     = make([]time.Time, 0, n)
	)
	for i, ev := range events {
		if !keep[i] {
			continue
		}
		en := entries[i]
		b := balances[en.ws]
		if en.usageSet != nil {
			b.usage = *en.usageSet
		} else {
			b.credit += en.creditDelta
			b.usage += en.usageDelta
		}
		b.revision, b.at = int64(ev.Revision), en.at
		ids, wss, kinds, refs = append(ids, ev.ID.String()), append(wss, en.ws), append(kinds, en.kind), append(refs, en.ref)
		revs, amounts = append(revs, int64(ev.Revision)), append(amounts, int64(en.amount))
		cds, uds = append(cds, int64(en.creditDelta)), append(uds, int64(en.usageDelta))
		cafter, uafter = append(cafter, int64(b.credit)), append(uafter, int64(b.usage))
		ats = append(ats, en.at)
	}
	tx.Exec(`INSERT INTO billing_transactions (id, workspace_id, revision, kind, amount, credit_delta, usage_delta,
			credit_after, usage_after, reference, occurred_at)
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[],
			$8::bigint[], $9::bigint[], $10::text[], $11::timestamptz[])
		ON CONFLICT (id) DO NOTHING`,
		ids, wss, revs, kinds, amounts, cds, uds, cafter, uafter, refs, ats)

	bws := make([]string, 0, len(workspaces))
	var bcredit, busage, brev []int64
	var bat []time.Time
	for _, ws := range workspaces {
		b := balances[ws]
		bws, bcredit, busage, brev, bat = append(bws, ws), append(bcredit, int64(b.credit)), append(busage, int64(b.usage)), append(brev, b.revision), append(bat, b.at)
	}
	tx.Exec(`INSERT INTO balances (workspace_id, credit, usage, revision, updated_at)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::timestamptz[])
		ON CONFLICT (workspace_id) DO UPDATE SET credit = EXCLUDED.credit, usage = EXCLUDED.usage,
			revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at`,
		bws, bcredit, busage, brev, bat)
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
	return []Projector{Users{}, Workspaces{}, Billing{}, Executions{}, APIKeys{}, Webhooks{},
		Apps{}, Authorizations{}, SigningKeys{}, WorkflowList{}, Runs{}, MCPTokens{}}
}
