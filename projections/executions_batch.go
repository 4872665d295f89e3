package projections

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// execChange is what a run of events does to one execution's row: the row a Submitted
// inserts, and the columns later events set (each with a flag, since NULL is a value too).
// Applying it equals applying the events one by one (TestApplyBatchEqualsApply).
type execChange struct {
	id string
	// submitted: the run holds the execution's Submitted, with the row's initial values.
	submitted                            bool
	workspace, module, cachedFrom, runID string
	attempts                             int
	createdAt                            time.Time
	// updated: the run holds a later event; the columns it sets follow.
	updated                                   bool
	setStatus, setAttempt, setLease, setRetry bool
	setError, setUsage                        bool
	status                                    string
	attempt                                   int
	lease, retry                              *time.Time
	errJSON                                   *string
	usage                                     int64
	updatedAt                                 time.Time
}

// apply folds one event into the change. A Submitted is always the first event of its
// execution's stream, so no later event of the run comes before it.
func (c *execChange) apply(e any) {
	switch e := e.(type) {
	case execution.Submitted:
		c.submitted, c.workspace, c.module, c.attempts, c.cachedFrom, c.createdAt = true, e.WorkspaceID, e.Module, e.Attempts, e.CachedFrom, e.At
		c.runID = e.RunID
		c.status, c.updatedAt = string(execution.StatusCreated), e.At
	case execution.Started:
		c.set(e.At)
		c.setStatus, c.status = true, string(execution.StatusRunning)
		c.setAttempt, c.attempt = true, e.Attempt
		lease := e.LeaseUntil
		c.setLease, c.lease = true, &lease
		c.setRetry, c.retry = true, nil
	case execution.LeaseExtended:
		c.set(e.At)
		lease := e.LeaseUntil
		c.setLease, c.lease = true, &lease
	case execution.AttemptFailed:
		c.set(e.At)
		retry, body := e.RetryAt, string(e.Error)
		c.setLease, c.lease = true, nil
		c.setRetry, c.retry = true, &retry
		c.setError, c.errJSON = true, &body
	case execution.Completed:
		c.set(e.At)
		c.setStatus, c.status = true, string(execution.StatusCompleted)
		c.setAttempt, c.attempt = true, e.Attempt // a call run first has no Started
		c.setLease, c.lease, c.setRetry, c.retry, c.setError, c.errJSON = true, nil, true, nil, true, nil
		c.setUsage, c.usage = true, int64(e.TotalUsage)
	case execution.Failed:
		c.set(e.At)
		body := string(e.Error)
		c.setStatus, c.status = true, string(execution.StatusFailed)
		c.setLease, c.lease, c.setRetry, c.retry = true, nil, true, nil
		c.setError, c.errJSON = true, &body
	}
}

func (c *execChange) set(at time.Time) { c.updated, c.updatedAt = true, at }

// ApplyBatch implements batchApplier: the run's changes folded per execution, then one insert of
// the new rows and one update of the rest, instead of a statement per event.
func (Executions) ApplyBatch(ctx context.Context, tx *Tx, events []eventstore.RecordedEvent) error {
	changes := map[string]*execChange{}
	var order []*execChange
	for _, ev := range events {
		e, err := decode(ev)
		if err != nil {
			return eventError(ev, err)
		}
		id := executionIDOf(e)
		if id == "" {
			continue
		}
		c := changes[id]
		if c == nil {
			c = &execChange{id: id}
			changes[id] = c
			order = append(order, c)
		}
		c.apply(e)
	}
	inserted, err := insertExecutions(ctx, tx, order)
	if err != nil {
		return err
	}
	var updates []*execChange
	for _, c := range order {
		if c.updated && !inserted[c.id] {
			updates = append(updates, c)
		}
	}
	updateExecutions(tx, updates)
	return nil
}

func executionIDOf(e any) string {
	switch e := e.(type) {
	case execution.Submitted:
		return e.ExecutionID
	case execution.Started:
		return e.ExecutionID
	case execution.AttemptFailed:
		return e.ExecutionID
	case execution.LeaseExtended:
		return e.ExecutionID
	case execution.Completed:
		return e.ExecutionID
	case execution.Failed:
		return e.ExecutionID
	}
	return ""
}

// insertExecutions inserts the rows of the changes that hold a Submitted, with every later
// column already set, and returns the ids inserted. A row that exists already is left alone
// (as Apply's ON CONFLICT DO NOTHING), and the later events then update it.
func insertExecutions(ctx context.Context, tx *Tx, changes []*execChange) (map[string]bool, error) {
	var ids, wss, modules, statuses, cached, runs []string
	var attempt, attempts []int32
	var leases, retries []*time.Time
	var errs []*string
	var usage []int64
	var created, updated []time.Time
	for _, c := range changes {
		if !c.submitted {
			continue
		}
		ids, wss, modules, statuses, cached = append(ids, c.id), append(wss, c.workspace), append(modules, c.module), append(statuses, c.status), append(cached, c.cachedFrom)
		runs = append(runs, c.runID)
		attempt, attempts = append(attempt, int32(c.attempt)), append(attempts, int32(c.attempts))
		leases, retries, errs, usage = append(leases, c.lease), append(retries, c.retry), append(errs, c.errJSON), append(usage, c.usage)
		created, updated = append(created, c.createdAt), append(updated, c.updatedAt)
	}
	inserted := map[string]bool{}
	if len(ids) == 0 {
		return inserted, nil
	}
	rows, err := tx.Query(ctx, `INSERT INTO executions (id, workspace_id, module, status, attempt, attempts, cached_from,
			lease_until, retry_at, error, total_usage, created_at, updated_at, run_id)
		SELECT id, ws, module, status, attempt, attempts, cached, lease, retry, err::jsonb, usage, created, updated, run
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[],
			$8::timestamptz[], $9::timestamptz[], $10::text[], $11::bigint[], $12::timestamptz[], $13::timestamptz[], $14::text[])
			AS u(id, ws, module, status, attempt, attempts, cached, lease, retry, err, usage, created, updated, run)
		ON CONFLICT (id) DO NOTHING RETURNING id::text`,
		ids, wss, modules, statuses, attempt, attempts, cached, leases, retries, errs, usage, created, updated, runs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		inserted[id] = true
	}
	return inserted, rows.Err()
}

// updateExecutions queues one update setting, per row, the columns its change sets.
func updateExecutions(tx *Tx, changes []*execChange) {
	if len(changes) == 0 {
		return
	}
	n := len(changes)
	ids, statuses := make([]string, 0, n), make([]string, 0, n)
	sStatus, sAttempt, sLease, sRetry, sError, sUsage := make([]bool, 0, n), make([]bool, 0, n), make([]bool, 0, n), make([]bool, 0, n), make([]bool, 0, n), make([]bool, 0, n)
	attempt, usage := make([]int32, 0, n), make([]int64, 0, n)
	leases, retries, errs := make([]*time.Time, 0, n), make([]*time.Time, 0, n), make([]*string, 0, n)
	updated := make([]time.Time, 0, n)
	for _, c := range changes {
		ids, statuses, attempt, usage = append(ids, c.id), append(statuses, c.status), append(attempt, int32(c.attempt)), append(usage, c.usage)
		sStatus, sAttempt, sLease = append(sStatus, c.setStatus), append(sAttempt, c.setAttempt), append(sLease, c.setLease)
		sRetry, sError, sUsage = append(sRetry, c.setRetry), append(sError, c.setError), append(sUsage, c.setUsage)
		leases, retries, errs, updated = append(leases, c.lease), append(retries, c.retry), append(errs, c.errJSON), append(updated, c.updatedAt)
	}
	tx.Exec(`UPDATE executions e SET
			status = CASE WHEN u.s_status THEN u.status ELSE e.status END,
			attempt = CASE WHEN u.s_attempt THEN u.attempt ELSE e.attempt END,
			lease_until = CASE WHEN u.s_lease THEN u.lease ELSE e.lease_until END,
			retry_at = CASE WHEN u.s_retry THEN u.retry ELSE e.retry_at END,
			error = CASE WHEN u.s_error THEN u.err::jsonb ELSE e.error END,
			total_usage = CASE WHEN u.s_usage THEN u.usage ELSE e.total_usage END,
			updated_at = u.updated
		FROM unnest($1::uuid[], $2::bool[], $3::text[], $4::bool[], $5::int[], $6::bool[], $7::timestamptz[],
			$8::bool[], $9::timestamptz[], $10::bool[], $11::text[], $12::bool[], $13::bigint[], $14::timestamptz[])
			AS u(id, s_status, status, s_attempt, attempt, s_lease, lease, s_retry, retry, s_error, err, s_usage, usage, updated)
		WHERE e.id = u.id`,
		ids, sStatus, statuses, sAttempt, attempt, sLease, leases, sRetry, retries, sError, errs, sUsage, usage, updated)
}
