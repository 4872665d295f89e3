package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
)

// AuditEntry is one billing event as folded from the log.
type AuditEntry struct {
	Revision    uint64          `json:"revision"`
	At          time.Time       `json:"at"`
	Kind        string          `json:"kind"`
	Amount      billing.Credits `json:"amount"`
	CreditAfter billing.Credits `json:"creditAfter"`
	UsageAfter  billing.Credits `json:"usageAfter"`
	Reference   string          `json:"reference,omitempty"`
}

// AuditReport compares a workspace's billing stream with its read models.
type AuditReport struct {
	WorkspaceID string       `json:"workspaceId"`
	Entries     []AuditEntry `json:"entries"`
	// Folded is the balance from the event store; ReadModel the projected one.
	Folded    Balance `json:"folded"`
	ReadModel Balance `json:"readModel"`
	// ReadModelRevision is the last billing event the read model applied (-1: none).
	ReadModelRevision int64    `json:"readModelRevision"`
	Behind            bool     `json:"behind"`
	Differences       []string `json:"differences"`
}

// Clean reports whether the read models agree with the log.
func (r AuditReport) Clean() bool { return len(r.Differences) == 0 }

// AuditBilling folds the workspace's billing stream and checks the balance and every history
// row of the read models against it. A read model that lags is compared at the revision it
// reached and reported as behind, so lag alone is not a difference. catchUp, if set, is called
// with the stream's last position before the read models are read, to let a projector finish.
func AuditBilling(ctx context.Context, store eventstore.Store, q *Queries, workspaceID string, catchUp func(eventstore.Position)) (AuditReport, error) {
	rep := AuditReport{WorkspaceID: workspaceID, Entries: []AuditEntry{}, Differences: []string{}}
	entries, last, err := foldBilling(ctx, store, workspaceID)
	if err != nil {
		return rep, err
	}
	rep.Entries = entries
	if n := len(entries); n > 0 {
		rep.Folded = balanceOf(entries[n-1])
		if catchUp != nil {
			catchUp(last)
		}
	}
	rm, rev, err := q.BalanceOf(ctx, workspaceID)
	if err != nil {
		return rep, fmt.Errorf("read balance: %w", err)
	}
	rep.ReadModel, rep.ReadModelRevision = rm, rev
	rep.Behind = rev < int64(len(entries))-1
	want := Balance{}
	if rev >= 0 && rev < int64(len(entries)) {
		want = balanceOf(entries[rev])
	} else if rev >= int64(len(entries)) {
		rep.Differences = append(rep.Differences, fmt.Sprintf("read model at revision %d, but the stream ends at %d", rev, len(entries)-1))
	}
	if want != rm {
		rep.Differences = append(rep.Differences, fmt.Sprintf("balance at revision %d: read model credit %s usage %s total %s, log credit %s usage %s total %s",
			rev, rm.Credit, rm.Usage, rm.Total, want.Credit, want.Usage, want.Total))
	}
	diffs, err := compareHistory(ctx, q, workspaceID, entries, rev)
	if err != nil {
		return rep, err
	}
	rep.Differences = append(rep.Differences, diffs...)
	return rep, nil
}

func balanceOf(e AuditEntry) Balance {
	return Balance{Credit: e.CreditAfter, Usage: e.UsageAfter, Total: e.CreditAfter + e.UsageAfter}
}

func foldBilling(ctx context.Context, store eventstore.Store, workspaceID string) ([]AuditEntry, eventstore.Position, error) {
	stream := eventstore.StreamName(billing.Category, workspaceID)
	var out []AuditEntry
	var s billing.State
	var last eventstore.Position
	for from := uint64(0); ; {
		events, err := store.ReadStream(ctx, stream, from, 1000)
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return out, last, nil
		}
		if err != nil {
			return nil, last, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, rec := range events {
			ev, err := domain.Events.Decode(rec.Type, rec.Data)
			if err != nil {
				return nil, last, fmt.Errorf("decode %s@%d: %w", stream, rec.Revision, err)
			}
			s = s.Evolve(ev)
			out = append(out, entryOf(rec, ev, s))
			last = rec.Position
		}
		if len(events) < 1000 {
			return out, last, nil
		}
		from = events[len(events)-1].Revision + 1
	}
}

func entryOf(rec eventstore.RecordedEvent, ev domain.Event, s billing.State) AuditEntry {
	e := AuditEntry{Revision: rec.Revision, CreditAfter: s.Credit, UsageAfter: s.Usage}
	switch ev := ev.(type) {
	case billing.CreditsPurchased:
		e.At, e.Kind, e.Amount, e.Reference = ev.At, KindTopUp, ev.Amount, ev.Reference
	case billing.PlanRenewed:
		e.At, e.Kind, e.Amount = ev.At, KindRenewal, ev.Included
	case billing.CreditsCharged:
		e.At, e.Kind, e.Amount, e.Reference = ev.At, KindCharge, ev.Amount, ev.Cause
	default:
		e.At, e.Kind = rec.CreatedAt, rec.Type
	}
	return e
}

// compareHistory checks every history row up to the read model's revision against the fold.
func compareHistory(ctx context.Context, q *Queries, workspaceID string, entries []AuditEntry, upTo int64) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT revision, kind, amount, credit_after, usage_after FROM billing_transactions
		WHERE workspace_id = $1 ORDER BY revision`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("read billing history: %w", err)
	}
	defer rows.Close()
	var diffs []string
	seen := 0
	for rows.Next() {
		var rev, amount, credit, usage int64
		var kind string
		if err := rows.Scan(&rev, &kind, &amount, &credit, &usage); err != nil {
			return nil, err
		}
		seen++
		if rev < 0 || rev >= int64(len(entries)) {
			diffs = append(diffs, fmt.Sprintf("history row at revision %d has no event", rev))
			continue
		}
		e := entries[rev]
		if e.Kind != kind || int64(e.Amount) != amount || int64(e.CreditAfter) != credit || int64(e.UsageAfter) != usage {
			diffs = append(diffs, fmt.Sprintf("history row %d: read model %s %s (credit %s, usage %s), log %s %s (credit %s, usage %s)",
				rev, kind, billing.Credits(amount), billing.Credits(credit), billing.Credits(usage), e.Kind, e.Amount, e.CreditAfter, e.UsageAfter))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if want := int(min(upTo+1, int64(len(entries)))); seen != want {
		diffs = append(diffs, fmt.Sprintf("history has %d rows, log has %d events up to revision %d", seen, want, upTo))
	}
	return diffs, nil
}
