package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/appevent"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
)

// EventTriggers indexes the ON_EVENT components of live workflows by event name: what
// POST /v1/sdk/events looks up (commands.Events.SendEvent). It is only an index: the command
// checks each candidate's name and filter again on the workflow as its stream holds it.
type EventTriggers struct{}

// Name implements Projector.
func (EventTriggers) Name() string { return "eventtriggers" }

// Tables implements Projector.
func (EventTriggers) Tables() []string { return []string{"event_triggers", "event_trigger_workflows"} }

// Filter implements Projector.
func (EventTriggers) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(workflow.Created{}, workflow.Updated{}, workflow.ComponentUpdated{}, workflow.Deleted{})}
}

// Migrate implements Projector.
func (EventTriggers) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS event_triggers (
		workflow_id  text NOT NULL,
		component_id text NOT NULL,
		workspace_id text NOT NULL,
		name         text NOT NULL,
		PRIMARY KEY (workflow_id, component_id)
	);
	CREATE INDEX IF NOT EXISTS event_triggers_name ON event_triggers (workspace_id, name);
	CREATE TABLE IF NOT EXISTS event_trigger_workflows (
		workflow_id  text PRIMARY KEY,
		workspace_id text NOT NULL
	);`)
	return err
}

// Apply implements Projector.
func (EventTriggers) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case workflow.Created:
		tx.Exec(`INSERT INTO event_trigger_workflows (workflow_id, workspace_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			e.WorkflowID, e.WorkspaceID)
		insertEventTriggers(tx, e.WorkspaceID, e.WorkflowID, e.Definition)
	case workflow.Updated:
		// The workspace is not on the event: the projector keeps each workflow's.
		var ws string
		err := tx.QueryRow(ctx, `SELECT workspace_id FROM event_trigger_workflows WHERE workflow_id = $1`, e.WorkflowID).Scan(&ws)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // deleted, or never created
		}
		if err != nil {
			return fmt.Errorf("event triggers: workspace of workflow %s: %w", e.WorkflowID, err)
		}
		tx.Exec(`DELETE FROM event_triggers WHERE workflow_id = $1`, e.WorkflowID)
		insertEventTriggers(tx, ws, e.WorkflowID, e.Definition)
	case workflow.ComponentUpdated:
		if c, err := workflow.ParseEvent(e.Config); err == nil {
			tx.Exec(`UPDATE event_triggers SET name = $3 WHERE workflow_id = $1 AND component_id = $2`, e.WorkflowID, e.ComponentID, c.Name)
		}
	case workflow.Deleted:
		tx.Exec(`DELETE FROM event_triggers WHERE workflow_id = $1`, e.WorkflowID)
		tx.Exec(`DELETE FROM event_trigger_workflows WHERE workflow_id = $1`, e.WorkflowID)
	}
	return nil
}

func insertEventTriggers(tx *Tx, workspaceID, workflowID string, d workflow.Definition) {
	for _, c := range d.Components {
		if c.Module != workflow.ModuleOnEvent {
			continue
		}
		if ec, err := workflow.ParseEvent(c.Config); err == nil {
			tx.Exec(`INSERT INTO event_triggers (workflow_id, component_id, workspace_id, name) VALUES ($1, $2, $3, $4)
				ON CONFLICT (workflow_id, component_id) DO UPDATE SET name = EXCLUDED.name`, workflowID, c.ID, workspaceID, ec.Name)
		}
	}
}

// EventTriggersOf lists the ON_EVENT components of a workspace's workflows that listen for
// name, in workflow then component order (commands.EventTriggerIndex).
func (q *Queries) EventTriggersOf(ctx context.Context, workspaceID, name string) ([]appevent.Match, error) {
	rows, err := q.db.Query(ctx, `SELECT workflow_id, component_id FROM event_triggers WHERE workspace_id = $1 AND name = $2
		ORDER BY workflow_id, component_id`, workspaceID, name)
	if err != nil {
		return nil, fmt.Errorf("event triggers: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (appevent.Match, error) {
		var t appevent.Match
		return t, r.Scan(&t.WorkflowID, &t.ComponentID)
	})
}
