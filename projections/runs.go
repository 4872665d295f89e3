package projections

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

// Runs projects workflow runs: what the scheduler's sweep looks for (runs that stopped
// moving) and what operators list. Run details are folded from the run's stream.
type Runs struct{}

// Name implements Projector.
func (Runs) Name() string { return "runs" }

// Tables implements Projector.
func (Runs) Tables() []string { return []string{"runs"} }

// Filter implements Projector.
func (Runs) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(run.Triggered{}, run.StagesDispatched{}, run.StageStarted{},
		run.StageCompleted{}, run.StageFailed{}, run.Finished{}, run.Admitted{})}
}

// Migrate implements Projector.
func (Runs) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS runs (
		id           uuid PRIMARY KEY,
		workspace_id text NOT NULL,
		workflow_id  text NOT NULL,
		status       text NOT NULL,
		created_at   timestamptz NOT NULL,
		updated_at   timestamptz NOT NULL
	);
	CREATE INDEX IF NOT EXISTS runs_unfinished ON runs (updated_at) WHERE status IN ('CREATED', 'EXECUTING');
	CREATE INDEX IF NOT EXISTS runs_workflow ON runs (workflow_id, created_at DESC);
	CREATE INDEX IF NOT EXISTS runs_workspace ON runs (workspace_id, created_at DESC);
	-- queue_id: the concurrency queue a run waits in, until admitted (NULL otherwise).
	ALTER TABLE runs ADD COLUMN IF NOT EXISTS queue_id text;
	CREATE INDEX IF NOT EXISTS runs_waiting ON runs (queue_id) WHERE queue_id IS NOT NULL;`)
	return err
}

// Apply implements Projector.
func (Runs) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case run.Triggered:
		var queue *string
		if j, ok := run.JoinQueue(e); ok {
			queue = &j.QueueID
		}
		tx.Exec(`INSERT INTO runs (id, workspace_id, workflow_id, status, created_at, updated_at, queue_id)
			VALUES ($1, $2, $3, 'CREATED', $4, $4, $5) ON CONFLICT (id) DO NOTHING`, e.RunID, e.WorkspaceID, e.WorkflowID, e.At, queue)
	case run.Admitted:
		tx.Exec(`UPDATE runs SET queue_id = NULL, updated_at = GREATEST(updated_at, $2) WHERE id = $1`, e.RunID, e.At)
	case run.StagesDispatched:
		tx.Exec(`UPDATE runs SET status = 'EXECUTING', updated_at = $2 WHERE id = $1 AND status = 'CREATED'`, e.RunID, e.At)
		tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
	case run.StageStarted:
		tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
	case run.StageCompleted:
		tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
	case run.StageFailed:
		tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
	case run.Finished:
		tx.Exec(`UPDATE runs SET status = $2, updated_at = $3, queue_id = NULL WHERE id = $1`, e.RunID, string(e.Status), e.At)
	}
	return nil
}

// UnfinishedRuns lists up to limit runs not finished and not changed since before: the
// scheduler reconciles them with their stage executions. Runs waiting in a concurrency queue
// are left out: nothing of theirs moves until admitted (WaitingQueues finds them), and a long
// line of them must not crowd out the runs that did stop moving.
func (q *Queries) UnfinishedRuns(ctx context.Context, before time.Time, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT id::text FROM runs WHERE status IN ('CREATED', 'EXECUTING') AND updated_at < $1
		AND queue_id IS NULL ORDER BY updated_at LIMIT $2`, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// WaitingQueues lists up to limit concurrency queues in which a run waits, oldest wait first:
// a scheduler taking over settles each, so that no slot stays held by a run whose end it
// did not see.
func (q *Queries) WaitingQueues(ctx context.Context, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT queue_id FROM runs WHERE queue_id IS NOT NULL AND status = 'CREATED'
		GROUP BY queue_id ORDER BY min(created_at) LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// EndedRuns lists those of ids that ended (COMPLETED or FAILED). The read model may be
// behind the log, never ahead: a run it lists has ended.
func (q *Queries) EndedRuns(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.db.Query(ctx, `SELECT id::text FROM runs WHERE id = ANY($1::uuid[]) AND status IN ('COMPLETED', 'FAILED')`, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// WaitingRuns lists up to limit runs waiting in concurrency queue id, in trigger order.
func (q *Queries) WaitingRuns(ctx context.Context, id string, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT id::text FROM runs WHERE queue_id = $1 AND status = 'CREATED'
		ORDER BY created_at LIMIT $2`, id, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
