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
func (Runs) Tables() []string { return []string{"runs", "run_waits"} }

// Filter implements Projector.
func (Runs) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(run.Triggered{}, run.StagesDispatched{}, run.StageStarted{},
		run.StageCompleted{}, run.StageFailed{}, run.Finished{}, run.Admitted{}, run.StageWaiting{})}
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
	CREATE INDEX IF NOT EXISTS runs_waiting ON runs (queue_id) WHERE queue_id IS NOT NULL;
	-- open_stages counts the run's dispatched stages not ended: a run whose open stages are all
	-- waits (run_waits) is left to its timers, not swept.
	ALTER TABLE runs ADD COLUMN IF NOT EXISTS open_stages int NOT NULL DEFAULT 0;
	CREATE TABLE IF NOT EXISTS run_waits (
		stage_id uuid PRIMARY KEY,
		run_id   uuid NOT NULL,
		kind     text NOT NULL,
		due_at   timestamptz
	);
	CREATE INDEX IF NOT EXISTS run_waits_due ON run_waits (due_at) WHERE due_at IS NOT NULL;
	CREATE INDEX IF NOT EXISTS run_waits_run ON run_waits (run_id);`)
	if err != nil {
		return err
	}
	return migrateWaitingStages(ctx, tx)
}

// migrateWaitingStages adds runs.waiting_stages, the run's rows in run_waits, and the index of
// the runs the sweep looks at (UnfinishedRuns). Without the count the sweep had to look up the
// waits of every unfinished run, most of them waiting when many wait: 100,000 waiting runs made
// each sweep (every 2 s) a scan of them all. A table from before the column is counted once.
func migrateWaitingStages(ctx context.Context, tx pgx.Tx) error {
	var had bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'runs' AND column_name = 'waiting_stages')`).Scan(&had); err != nil {
		return err
	}
	if had {
		return nil
	}
	_, err := tx.Exec(ctx, `
	ALTER TABLE runs ADD COLUMN waiting_stages int NOT NULL DEFAULT 0;
	UPDATE runs SET waiting_stages = w.n FROM (SELECT run_id, count(*) AS n FROM run_waits GROUP BY run_id) w
		WHERE runs.id = w.run_id;
	CREATE INDEX IF NOT EXISTS runs_stalled ON runs (updated_at)
		WHERE status IN ('CREATED', 'EXECUTING') AND queue_id IS NULL AND (open_stages = 0 OR open_stages <> waiting_stages);`)
	return err
}

// applyDispatched moves a run's row on for a dispatch: EXECUTING once dispatched, and one
// more open stage for each stage that runs (a skipped one completes at once).
func applyDispatched(tx *Tx, e run.StagesDispatched) {
	tx.Exec(`UPDATE runs SET status = 'EXECUTING', updated_at = $2 WHERE id = $1 AND status = 'CREATED'`, e.RunID, e.At)
	tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
	if open := openedBy(e); open > 0 {
		tx.Exec(`UPDATE runs SET open_stages = open_stages + $2 WHERE id = $1`, e.RunID, open)
	}
}

// openedBy counts the stages of a dispatch that run.
func openedBy(e run.StagesDispatched) int32 {
	open := int32(0)
	for _, d := range e.Stages {
		if !d.Skipped {
			open++
		}
	}
	return open
}

// countWaitsSQL sets the waiting_stages of runs $1 from run_waits, after a transaction's
// statements on run_waits: an insert may find its row there and a delete none, so the count is
// taken, not moved. A row whose count has not changed (every run that ends: its finish already
// set 0) is left unwritten, which spares a new row version and its WAL: in `bench runs`, 2,000
// rows and 60 ms of PostgreSQL's time became none and 13 ms.
const countWaitsSQL = `UPDATE runs SET waiting_stages = (SELECT count(*) FROM run_waits w WHERE w.run_id = runs.id)
	WHERE id = ANY($1::uuid[]) AND waiting_stages <> (SELECT count(*) FROM run_waits w WHERE w.run_id = runs.id)`

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
		applyDispatched(tx, e)
	case run.StageStarted:
		tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
	case run.StageCompleted:
		tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
		tx.Exec(`UPDATE runs SET open_stages = greatest(open_stages - 1, 0) WHERE id = $1`, e.RunID)
		if e.Wait != "" {
			tx.Exec(`DELETE FROM run_waits WHERE stage_id = $1`, e.StageID)
			tx.Exec(countWaitsSQL, []string{e.RunID})
		}
		if e.Then != nil {
			applyDispatched(tx, *e.Then)
		}
	case run.StageFailed:
		tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
		tx.Exec(`UPDATE runs SET open_stages = greatest(open_stages - 1, 0) WHERE id = $1`, e.RunID)
		tx.Exec(`DELETE FROM run_waits WHERE stage_id = $1`, e.StageID)
		tx.Exec(countWaitsSQL, []string{e.RunID})
	case run.StageWaiting:
		tx.Exec(`UPDATE runs SET updated_at = $2 WHERE id = $1 AND updated_at < $2`, e.RunID, e.At)
		tx.Exec(`INSERT INTO run_waits (stage_id, run_id, kind, due_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (stage_id) DO NOTHING`, e.StageID, e.RunID, e.WaitingFor.Kind, e.WaitingFor.Until)
		tx.Exec(countWaitsSQL, []string{e.RunID})
	case run.Finished:
		tx.Exec(`UPDATE runs SET status = $2, updated_at = $3, queue_id = NULL, open_stages = 0, waiting_stages = 0
			WHERE id = $1`, e.RunID, string(e.Status), e.At)
		tx.Exec(`DELETE FROM run_waits WHERE run_id = $1`, e.RunID)
	}
	return nil
}

// UnfinishedRuns lists up to limit runs not finished and not changed since before: the
// scheduler reconciles them with their stage executions. Runs waiting in a concurrency queue
// are left out: nothing of theirs moves until admitted (WaitingQueues finds them), and a long
// line of them must not crowd out the runs that did stop moving. So is a run whose open stages
// all wait (run_waits): there is nothing to reconcile, and its timers step it.
func (q *Queries) UnfinishedRuns(ctx context.Context, before time.Time, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT id::text FROM runs WHERE status IN ('CREATED', 'EXECUTING') AND updated_at < $1
		AND queue_id IS NULL AND (open_stages = 0 OR open_stages <> waiting_stages)
		ORDER BY updated_at LIMIT $2`, before, limit)
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

// DueWait is an open wait with a due time (run_waits): a time wait's end, or a signal or
// approval wait's timeout.
type DueWait struct {
	RunID   string
	StageID string
	DueAt   time.Time
}

// DueWaits lists up to limit open waits due before before, the soonest first: the scheduler
// arms timers for these only, so that memory holds what is due soon, not every wait.
func (q *Queries) DueWaits(ctx context.Context, before time.Time, limit int) ([]DueWait, error) {
	rows, err := q.db.Query(ctx, `SELECT run_id::text, stage_id::text, due_at FROM run_waits
		WHERE due_at IS NOT NULL AND due_at < $1 ORDER BY due_at LIMIT $2`, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DueWait, error) {
		var w DueWait
		err := r.Scan(&w.RunID, &w.StageID, &w.DueAt)
		return w, err
	})
}

// OpenWaits counts the open waits of every run (run_waits), for metrics and benchmarks.
func (q *Queries) OpenWaits(ctx context.Context) (int, error) {
	var n int
	err := q.db.QueryRow(ctx, `SELECT count(*) FROM run_waits`).Scan(&n)
	return n, err
}

// RunsProjectedTo is the position of the last event the runs projector applied: the runs
// UnfinishedRuns lists are those triggered up to it.
func (q *Queries) RunsProjectedTo(ctx context.Context) (eventstore.Position, error) {
	cp, err := readCheckpoint(ctx, q.db, Runs{}.Name())
	return cp.Position, err
}
