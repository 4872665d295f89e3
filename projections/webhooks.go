package projections

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// Webhooks projects the webhook deliveries owed: what the dispatcher's sweep looks for when
// the live feed missed a delivery (another instance died mid-attempt, a retry came due while no
// process was running).
type Webhooks struct{}

// Name implements Projector.
func (Webhooks) Name() string { return "webhooks" }

// Tables implements Projector.
func (Webhooks) Tables() []string { return []string{"webhook_deliveries"} }

// Filter implements Projector.
func (Webhooks) Filter() eventstore.Filter {
	types := typesOf(execution.Submitted{}, execution.Completed{}, execution.Failed{})
	return eventstore.Filter{Types: append(types, execution.DeliveryEventTypes()...)}
}

// Migrate implements Projector. due_at is when the next attempt may be claimed: at once when a
// round opens, at the retry time after a failure, at the lease's end while an attempt is out.
func (Webhooks) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS webhook_deliveries (
		execution_id  uuid PRIMARY KEY,
		workspace_id  text NOT NULL,
		pending       boolean NOT NULL DEFAULT false,
		attempt_count int NOT NULL DEFAULT 0,
		due_at        timestamptz,
		delivered_at  timestamptz,
		updated_at    timestamptz NOT NULL
	);
	CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (due_at) WHERE pending;`)
	return err
}

// Apply implements Projector.
func (Webhooks) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case execution.Submitted:
		if e.Callback.URL != "" {
			tx.Exec(`INSERT INTO webhook_deliveries (execution_id, workspace_id, updated_at) VALUES ($1, $2, $3)
				ON CONFLICT (execution_id) DO NOTHING`, e.ExecutionID, e.WorkspaceID, e.At)
		}
	case execution.Completed:
		tx.Exec(`UPDATE webhook_deliveries SET pending = true, due_at = $2, updated_at = $2 WHERE execution_id = $1`, e.ExecutionID, e.At)
	case execution.Failed:
		tx.Exec(`UPDATE webhook_deliveries SET pending = true, due_at = $2, updated_at = $2 WHERE execution_id = $1`, e.ExecutionID, e.At)
	case execution.WebhookReplayRequested:
		tx.Exec(`UPDATE webhook_deliveries SET pending = true, due_at = $2, updated_at = $2 WHERE execution_id = $1`, e.ExecutionID, e.At)
	case execution.WebhookAttemptStarted:
		tx.Exec(`UPDATE webhook_deliveries SET attempt_count = $2, due_at = $3, updated_at = $4 WHERE execution_id = $1`,
			e.ExecutionID, e.Attempt, e.LeaseUntil, e.At)
	case execution.WebhookDelivered:
		tx.Exec(`UPDATE webhook_deliveries SET pending = false, due_at = NULL, delivered_at = $2, updated_at = $2 WHERE execution_id = $1`,
			e.ExecutionID, e.At)
	case execution.WebhookAttemptFailed:
		if e.Final {
			tx.Exec(`UPDATE webhook_deliveries SET pending = false, due_at = NULL, updated_at = $2 WHERE execution_id = $1`, e.ExecutionID, e.At)
		} else {
			tx.Exec(`UPDATE webhook_deliveries SET due_at = $2, updated_at = $3 WHERE execution_id = $1`, e.ExecutionID, e.RetryAt, e.At)
		}
	}
	return nil
}

// ApplyBatch implements batchApplier: the same rows as Apply event by event, with the
// terminal events' updates (one per execution, most of them of executions without a callback,
// so updating nothing) gathered into one statement. They are flushed before any other event's
// statement, so every statement still runs in log order.
func (w Webhooks) ApplyBatch(ctx context.Context, tx *Tx, events []eventstore.RecordedEvent) error {
	var opened terminalRounds
	for _, ev := range events {
		e, err := decode(ev)
		if err != nil {
			return err
		}
		switch e := e.(type) {
		case execution.Completed:
			opened.add(e.ExecutionID, e.At)
			continue
		case execution.Failed:
			opened.add(e.ExecutionID, e.At)
			continue
		case execution.Submitted:
			if e.Callback.URL == "" {
				continue // writes nothing: no need to flush
			}
		}
		opened.flush(tx)
		if err := w.Apply(ctx, tx, ev); err != nil {
			return err
		}
	}
	opened.flush(tx)
	return nil
}

// terminalRounds gathers the rounds that Completed and Failed open, for one statement.
type terminalRounds struct {
	ids []string
	ats []time.Time
}

func (r *terminalRounds) add(id string, at time.Time) {
	r.ids, r.ats = append(r.ids, id), append(r.ats, at)
}

// flush queues the gathered updates. An execution has one terminal event, so no row is named
// twice (UPDATE ... FROM would apply only one of two).
func (r *terminalRounds) flush(tx *Tx) {
	if len(r.ids) == 0 {
		return
	}
	tx.Exec(`UPDATE webhook_deliveries w SET pending = true, due_at = u.at, updated_at = u.at
		FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, at) WHERE w.execution_id = u.id`, r.ids, r.ats)
	r.ids, r.ats = nil, nil
}

// DueWebhooks lists up to limit executions owing a webhook attempt that has been due for longer
// than grace at now (the live path had its chance first).
func (q *Queries) DueWebhooks(ctx context.Context, now time.Time, grace time.Duration, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT execution_id::text FROM webhook_deliveries
		WHERE pending AND due_at < $1 ORDER BY due_at LIMIT $2`, now.Add(-grace), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
