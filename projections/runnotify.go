package projections

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/runnotify"
	"github.com/switchyard/switchyard/eventstore"
)

// RunNotify projects the workflow.run.terminal deliveries owed, as Webhooks does for
// executions: what the dispatcher's sweep looks for when the live feed missed one. Only runs
// whose definition has a notify get a row.
type RunNotify struct{}

// Name implements Projector.
func (RunNotify) Name() string { return "runnotify" }

// Tables implements Projector.
func (RunNotify) Tables() []string { return []string{"run_notifications"} }

// Filter implements Projector.
func (RunNotify) Filter() eventstore.Filter {
	return eventstore.Filter{Types: append(typesOf(run.Triggered{}, run.Finished{}), runnotify.EventTypes()...)}
}

// Migrate implements Projector. due_at is when the next attempt may be claimed.
func (RunNotify) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS run_notifications (
		run_id        uuid PRIMARY KEY,
		pending       boolean NOT NULL DEFAULT false,
		attempt_count int NOT NULL DEFAULT 0,
		due_at        timestamptz,
		delivered_at  timestamptz,
		updated_at    timestamptz NOT NULL
	);
	CREATE INDEX IF NOT EXISTS run_notifications_due ON run_notifications (due_at) WHERE pending;`)
	return err
}

// Apply implements Projector.
func (RunNotify) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	const open = `UPDATE run_notifications SET pending = true, due_at = $2, updated_at = $2 WHERE run_id = $1`
	switch e := e.(type) {
	case run.Triggered:
		if e.Definition.Notify != nil {
			tx.Exec(`INSERT INTO run_notifications (run_id, updated_at) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING`, e.RunID, e.At)
		}
	case run.Finished:
		tx.Exec(open, e.RunID, e.At)
	case runnotify.ReplayRequested:
		tx.Exec(open, e.RunID, e.At)
	case runnotify.AttemptStarted:
		tx.Exec(`UPDATE run_notifications SET attempt_count = $2, due_at = $3, updated_at = $4 WHERE run_id = $1`,
			e.RunID, e.Attempt, e.LeaseUntil, e.At)
	case runnotify.Delivered:
		tx.Exec(`UPDATE run_notifications SET pending = false, due_at = NULL, delivered_at = $2, updated_at = $2 WHERE run_id = $1`, e.RunID, e.At)
	case runnotify.AttemptFailed:
		if e.Final {
			tx.Exec(`UPDATE run_notifications SET pending = false, due_at = NULL, updated_at = $2 WHERE run_id = $1`, e.RunID, e.At)
		} else {
			tx.Exec(`UPDATE run_notifications SET due_at = $2, updated_at = $3 WHERE run_id = $1`, e.RunID, e.RetryAt, e.At)
		}
	}
	return nil
}

// DueRunNotifications lists up to limit runs owing a workflow.run.terminal attempt that has
// been due for longer than grace at now.
func (q *Queries) DueRunNotifications(ctx context.Context, now time.Time, grace time.Duration, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT run_id::text FROM run_notifications
		WHERE pending AND due_at < $1 ORDER BY due_at LIMIT $2`, now.Add(-grace), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ApplyBatch implements batchApplier: Apply's statements, but for consecutive openings of
// distinct runs' deliveries (a run's end, a replay: every run's end opens its row's round,
// when it has one) sent as one update, where Apply sends one each.
func (r RunNotify) ApplyBatch(ctx context.Context, tx *Tx, events []eventstore.RecordedEvent) error {
	var ids []string
	var ats []time.Time
	group := map[string]bool{}
	flush := func() {
		if len(ids) > 0 {
			tx.Exec(`UPDATE run_notifications n SET pending = true, due_at = u.at, updated_at = u.at
				FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, at) WHERE n.run_id = u.id`, ids, ats)
			ids, ats = nil, nil
			clear(group)
		}
	}
	for _, ev := range events {
		e, err := decode(ev)
		if err != nil {
			return eventError(ev, err)
		}
		var id string
		var at time.Time
		switch e := e.(type) {
		case run.Finished:
			id, at = e.RunID, e.At
		case runnotify.ReplayRequested:
			id, at = e.RunID, e.At
		}
		if id == "" || group[id] {
			flush() // the log's order for what else touches the rows, and one row once an update
		}
		if id == "" {
			if err := r.Apply(ctx, tx, ev); err != nil {
				return err
			}
			continue
		}
		ids, ats, group[id] = append(ids, id), append(ats, at), true
	}
	flush()
	return nil
}
