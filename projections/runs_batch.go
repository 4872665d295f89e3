package projections

import (
	"context"
	"math"
	"time"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

// runChange is what a batch's events of one run do to its runs row, as a function of the row
// they find: Apply's statements (an insert, then updates that each read the row) composed.
// Applying it equals applying the events one by one (TestApplyBatchEqualsApply).
type runChange struct {
	id string
	// triggered: the batch holds the run's Triggered (its first event), with the row it inserts.
	triggered                 bool
	workspace, workflow       string
	createdAt                 time.Time
	queue                     *string
	fallback                  bool // a Triggered after other events of the run: Apply's order
	updated                   bool // an event after the Triggered, or without one
	events                    []eventstore.RecordedEvent
	setStatus                 *string    // a Finished: the status it sets
	dispatched                bool       // a StagesDispatched: CREATED becomes EXECUTING
	setUpdated                *time.Time // a Finished: updated_at set, then raised by later events
	createdUpdated, maxUpdate *time.Time // updated_at when the row was CREATED at the first dispatch / otherwise raised to
	clearQueue                bool
	setOpen                   *int32 // a Finished: open_stages set, then moved by later events
	openAdd, openFloor        int32  // otherwise open_stages becomes greatest(open_stages + openAdd, openFloor)
}

// noFloor is openFloor while no decrement clamped open_stages at 0.
const noFloor = math.MinInt32

// raise is Apply's `updated_at = $2 WHERE updated_at < $2` (and Admitted's GREATEST).
func (c *runChange) raise(at time.Time) {
	c.updated = true
	if c.setUpdated != nil {
		c.setUpdated = later(c.setUpdated, at)
		return
	}
	c.maxUpdate = later(c.maxUpdate, at)
	if c.createdUpdated != nil {
		c.createdUpdated = later(c.createdUpdated, at)
	}
}

func later(t *time.Time, at time.Time) *time.Time {
	if t == nil || t.Before(at) {
		return &at
	}
	return t
}

// add is `open_stages = open_stages + n`; done `open_stages = greatest(open_stages - 1, 0)`.
func (c *runChange) add(n int32) {
	if c.setOpen != nil {
		v := *c.setOpen + n
		c.setOpen = &v
		return
	}
	c.openAdd += n
	if c.openFloor != noFloor {
		c.openFloor += n
	}
}

func (c *runChange) done() {
	if c.setOpen != nil {
		v := max(*c.setOpen-1, 0)
		c.setOpen = &v
		return
	}
	c.openAdd--
	if c.openFloor == noFloor {
		c.openFloor = 0
	} else {
		c.openFloor = max(c.openFloor-1, 0)
	}
}

// apply folds one event of the run into the change; the run_waits statements it makes are
// queued by the caller, in the log's order.
func (c *runChange) apply(e any) {
	switch e := e.(type) {
	case run.Admitted:
		c.raise(e.At)
		c.clearQueue = true
	case run.StagesDispatched:
		if c.setStatus == nil && !c.dispatched {
			// The first dispatch finds the row as the batch found it: CREATED, it sets
			// updated_at to e.At whatever it was.
			c.dispatched = true
			at := e.At
			c.createdUpdated = &at
		}
		c.raise(e.At)
		if open := openedBy(e); open > 0 {
			c.add(open)
		}
	case run.StageStarted:
		c.raise(e.At)
	case run.StageCompleted:
		c.raise(e.At)
		c.done()
		if e.Then != nil {
			c.apply(*e.Then)
		}
	case run.StageFailed:
		c.raise(e.At)
		c.done()
	case run.StageWaiting:
		c.raise(e.At)
	case run.Finished:
		c.updated = true
		st, at, zero := string(e.Status), e.At, int32(0)
		c.setStatus, c.setUpdated, c.clearQueue, c.setOpen = &st, &at, true, &zero
	}
}

// row is the change applied to the row r: what the update below computes in SQL.
func (c *runChange) row(status string, updatedAt time.Time, queue *string, open int32) (string, time.Time, *string, int32) {
	wasCreated := status == string(run.StatusCreated)
	switch {
	case c.setStatus != nil:
		status = *c.setStatus
	case c.dispatched && wasCreated:
		status = string(run.StatusExecuting)
	}
	switch {
	case c.setUpdated != nil:
		updatedAt = *c.setUpdated
	case c.createdUpdated != nil && wasCreated:
		updatedAt = *c.createdUpdated
	case c.maxUpdate != nil && c.maxUpdate.After(updatedAt):
		updatedAt = *c.maxUpdate
	}
	if c.clearQueue {
		queue = nil
	}
	if c.setOpen != nil {
		open = *c.setOpen
	} else {
		open = max(open+c.openAdd, c.openFloor)
	}
	return status, updatedAt, queue, open
}

// ApplyBatch implements batchApplier: each run's events folded into one change, then one
// statement inserting the new rows with their changes applied and updating the others, where
// Apply takes up to three statements an event; run_waits statements as Apply makes them.
func (r Runs) ApplyBatch(ctx context.Context, tx *Tx, events []eventstore.RecordedEvent) error {
	changes := map[string]*runChange{}
	var order []*runChange
	var waits []waitStmt
	for _, ev := range events {
		e, err := decode(ev)
		if err != nil {
			return eventError(ev, err)
		}
		id := runIDOf(e)
		if id == "" {
			continue
		}
		c := changes[id]
		if c == nil {
			c = &runChange{id: id, openFloor: noFloor}
			changes[id] = c
			order = append(order, c)
		}
		c.events = append(c.events, ev)
		if t, ok := e.(run.Triggered); ok {
			if c.triggered || c.updated {
				c.fallback = true // not a log's order: Apply's statements, one by one
				continue
			}
			c.triggered, c.workspace, c.workflow, c.createdAt = true, t.WorkspaceID, t.WorkflowID, t.At
			if j, ok := run.JoinQueue(t); ok {
				q := j.QueueID
				c.queue = &q
			}
			continue
		}
		c.apply(e)
		waits = appendWaits(waits, e)
	}
	var live []*runChange
	for _, c := range order {
		if c.fallback {
			for _, ev := range c.events {
				if err := r.Apply(ctx, tx, ev); err != nil {
					return err
				}
			}
			continue
		}
		live = append(live, c)
	}
	writeRuns(tx, live)
	var ended []string // consecutive deletes of whole runs' waits, sent as one
	flush := func() {
		if len(ended) > 0 {
			tx.Exec(`DELETE FROM run_waits WHERE run_id = ANY($1::uuid[])`, ended)
			ended = nil
		}
	}
	var counted []string // runs whose waits changed: waiting_stages is counted after
	seen := map[string]bool{}
	for _, w := range waits {
		if changes[w.run].fallback {
			continue // its Apply made them
		}
		if !seen[w.run] {
			seen[w.run] = true
			counted = append(counted, w.run)
		}
		switch {
		case w.sql == "":
			ended = append(ended, w.run)
		default:
			flush()
			tx.Exec(w.sql, w.args...)
		}
	}
	flush()
	if len(counted) > 0 {
		tx.Exec(countWaitsSQL, counted)
	}
	return nil
}

func runIDOf(e any) string {
	switch e := e.(type) {
	case run.Triggered:
		return e.RunID
	case run.Admitted:
		return e.RunID
	case run.StagesDispatched:
		return e.RunID
	case run.StageStarted:
		return e.RunID
	case run.StageCompleted:
		return e.RunID
	case run.StageFailed:
		return e.RunID
	case run.StageWaiting:
		return e.RunID
	case run.Finished:
		return e.RunID
	}
	return ""
}

// waitStmt is one run_waits statement of Apply's, kept in the log's order.
type waitStmt struct {
	run  string
	sql  string
	args []any
}

// appendWaits adds the run_waits statements Apply makes for e; a delete of a whole run's
// waits has no sql (ApplyBatch sends consecutive ones as one).
func appendWaits(w []waitStmt, e any) []waitStmt {
	switch e := e.(type) {
	case run.StageCompleted:
		if e.Wait != "" {
			w = append(w, waitStmt{e.RunID, `DELETE FROM run_waits WHERE stage_id = $1`, []any{e.StageID}})
		}
	case run.StageFailed:
		w = append(w, waitStmt{e.RunID, `DELETE FROM run_waits WHERE stage_id = $1`, []any{e.StageID}})
	case run.StageWaiting:
		w = append(w, waitStmt{e.RunID, `INSERT INTO run_waits (stage_id, run_id, kind, due_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (stage_id) DO NOTHING`, []any{e.StageID, e.RunID, e.WaitingFor.Kind, e.WaitingFor.Until}})
	case run.Finished:
		w = append(w, waitStmt{run: e.RunID})
	}
	return w
}

// writeRuns queues one statement for every change: the rows of runs triggered in the batch
// inserted with their later events applied (Triggered is a run's first event), and the others
// (and any row that existed already, as Apply's ON CONFLICT DO NOTHING leaves it to the later
// updates) updated by the composed change. The update cannot see the rows the insert adds: it
// runs on the statement's snapshot.
func writeRuns(tx *Tx, changes []*runChange) {
	if len(changes) == 0 {
		return
	}
	n := len(changes)
	ids := make([]string, 0, n)
	ins, upd, dispatched, clearQueue := make([]bool, 0, n), make([]bool, 0, n), make([]bool, 0, n), make([]bool, 0, n)
	wss, wfs, statuses := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	queues, setStatus := make([]*string, 0, n), make([]*string, 0, n)
	created, updated := make([]time.Time, 0, n), make([]time.Time, 0, n)
	setUpdated, createdUpdated, maxUpdate := make([]*time.Time, 0, n), make([]*time.Time, 0, n), make([]*time.Time, 0, n)
	opens, openAdd, openFloor := make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n)
	setOpen := make([]*int32, 0, n)
	for _, c := range changes {
		var status string
		var upAt time.Time
		var queue *string
		var open int32
		if c.triggered {
			status, upAt, queue, open = c.row(string(run.StatusCreated), c.createdAt, c.queue, 0)
		}
		ids, ins, upd = append(ids, c.id), append(ins, c.triggered), append(upd, c.updated)
		wss, wfs, statuses, queues = append(wss, c.workspace), append(wfs, c.workflow), append(statuses, status), append(queues, queue)
		created, updated, opens = append(created, c.createdAt), append(updated, upAt), append(opens, open)
		setStatus, dispatched, clearQueue = append(setStatus, c.setStatus), append(dispatched, c.dispatched), append(clearQueue, c.clearQueue)
		setUpdated, createdUpdated, maxUpdate = append(setUpdated, c.setUpdated), append(createdUpdated, c.createdUpdated), append(maxUpdate, c.maxUpdate)
		setOpen, openAdd, openFloor = append(setOpen, c.setOpen), append(openAdd, c.openAdd), append(openFloor, c.openFloor)
	}
	tx.Exec(`WITH u AS (
			SELECT * FROM unnest($1::uuid[], $2::bool[], $3::bool[], $4::text[], $5::text[], $6::text[], $7::text[],
				$8::timestamptz[], $9::timestamptz[], $10::int[], $11::text[], $12::bool[], $13::timestamptz[],
				$14::timestamptz[], $15::timestamptz[], $16::bool[], $17::int[], $18::int[], $19::int[])
				AS u(id, ins, upd, ws, wf, status, queue, created, updated, open, set_status, dispatched, set_updated,
					created_updated, max_update, clear_queue, set_open, open_add, open_floor)
		), inserted AS (
			INSERT INTO runs (id, workspace_id, workflow_id, status, created_at, updated_at, queue_id, open_stages)
			SELECT id, ws, wf, status, created, updated, queue, open FROM u WHERE ins
			ON CONFLICT (id) DO NOTHING
		)
		UPDATE runs r SET
			status = COALESCE(u.set_status, CASE WHEN u.dispatched AND r.status = 'CREATED' THEN 'EXECUTING' ELSE r.status END),
			updated_at = COALESCE(u.set_updated, CASE WHEN u.created_updated IS NOT NULL AND r.status = 'CREATED'
				THEN u.created_updated ELSE GREATEST(r.updated_at, u.max_update) END),
			queue_id = CASE WHEN u.clear_queue THEN NULL ELSE r.queue_id END,
			open_stages = COALESCE(u.set_open, GREATEST(r.open_stages + u.open_add, u.open_floor))
		FROM u WHERE r.id = u.id AND u.upd`,
		ids, ins, upd, wss, wfs, statuses, queues, created, updated, opens, setStatus, dispatched, setUpdated,
		createdUpdated, maxUpdate, clearQueue, setOpen, openAdd, openFloor)
}
