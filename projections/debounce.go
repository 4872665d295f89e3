package projections

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/debounce"
	"github.com/switchyard/switchyard/eventstore"
)

// DebounceWindows projects the windows of debounced triggers: what the debounce reactor arms
// its timers from when it starts (windows open, or flushed and not started), and where a
// delivery finds its key's latest window.
type DebounceWindows struct{}

// Name implements Projector.
func (DebounceWindows) Name() string { return "debouncewindows" }

// Tables implements Projector.
func (DebounceWindows) Tables() []string { return []string{"debounce_windows"} }

// Filter implements Projector.
func (DebounceWindows) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(debounce.Buffered{}, debounce.Flushed{}, debounce.Started{})}
}

// Migrate implements Projector.
func (DebounceWindows) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS debounce_windows (
		stream       text PRIMARY KEY,
		key_id       text NOT NULL,
		n            int NOT NULL,
		workspace_id text NOT NULL,
		workflow_id  text NOT NULL,
		component_id text NOT NULL,
		items        int NOT NULL,
		first_at     timestamptz NOT NULL,
		last_at      timestamptz NOT NULL,
		quiet_ms     bigint NOT NULL,
		max_wait_ms  bigint NOT NULL,
		max_items    int NOT NULL,
		due_at       timestamptz,
		flushed      boolean NOT NULL DEFAULT false,
		started      boolean NOT NULL DEFAULT false
	);
	CREATE INDEX IF NOT EXISTS debounce_windows_key ON debounce_windows (key_id, n DESC);
	CREATE INDEX IF NOT EXISTS debounce_windows_pending ON debounce_windows (due_at) WHERE NOT started;`)
	return err
}

// Apply implements Projector.
func (DebounceWindows) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case debounce.Buffered:
		if e.Config != nil {
			keyID := strings.TrimPrefix(ev.Stream, debounce.Category+"-")
			keyID = keyID[:max(strings.LastIndexByte(keyID, '-'), 0)]
			tx.Exec(`INSERT INTO debounce_windows (stream, key_id, n, workspace_id, workflow_id, component_id, items, first_at, last_at,
				quiet_ms, max_wait_ms, max_items) VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $7, $8, $9, $10) ON CONFLICT (stream) DO NOTHING`,
				ev.Stream, keyID, e.N, e.WorkspaceID, e.WorkflowID, e.ComponentID, e.At, e.Config.QuietMs, e.Config.MaxWaitMs, e.Config.MaxItems)
		}
		// The due time as debounce.State.Due has it.
		tx.Exec(`UPDATE debounce_windows SET items = items + 1, last_at = $2::timestamptz,
			due_at = CASE WHEN items + 1 >= max_items THEN $2::timestamptz
				ELSE LEAST($2::timestamptz + quiet_ms * interval '1 millisecond', first_at + max_wait_ms * interval '1 millisecond') END
			WHERE stream = $1 AND NOT flushed`, ev.Stream, e.At)
	case debounce.Flushed:
		tx.Exec(`UPDATE debounce_windows SET flushed = true, due_at = $2 WHERE stream = $1`, ev.Stream, e.At)
	case debounce.Started:
		tx.Exec(`UPDATE debounce_windows SET started = true WHERE stream = $1`, ev.Stream)
	}
	return nil
}

// PendingWindow is a debounce window whose run has not started: open, or flushed.
type PendingWindow struct {
	Stream string
	DueAt  time.Time
}

// PendingDebounceWindows lists up to limit windows whose runs have not started, soonest due
// first: the debounce reactor's timers.
func (q *Queries) PendingDebounceWindows(ctx context.Context, limit int) ([]PendingWindow, error) {
	rows, err := q.db.Query(ctx, `SELECT stream, due_at FROM debounce_windows WHERE NOT started ORDER BY due_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("pending debounce windows: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingWindow, error) {
		var w PendingWindow
		err := r.Scan(&w.Stream, &w.DueAt)
		w.DueAt = w.DueAt.UTC()
		return w, err
	})
}

// OpenWindow is a debounce window still gathering (or flushed and about to start its run), as
// the workflow page lists it.
type OpenWindow struct {
	ComponentID string
	Items       int
	FirstAt     time.Time
	DueAt       *time.Time
}

// OpenDebounceWindows lists up to limit windows of a workflow whose runs have not started,
// soonest due first.
func (q *Queries) OpenDebounceWindows(ctx context.Context, workspaceID, workflowID string, limit int) ([]OpenWindow, error) {
	rows, err := q.db.Query(ctx, `SELECT component_id, items, first_at, due_at FROM debounce_windows
		WHERE workspace_id = $1 AND workflow_id = $2 AND NOT started ORDER BY due_at NULLS LAST LIMIT $3`, workspaceID, workflowID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OpenWindow, error) {
		var w OpenWindow
		err := r.Scan(&w.ComponentID, &w.Items, &w.FirstAt, &w.DueAt)
		return w, err
	})
}
