package execution

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// An attempt of a workspace module with a worker transport (issue 28) is a task: a worker
// leases it by long-poll (DecideLease, recorded as Started with the worker's id), renews the
// lease by heartbeat (DecideExtend, LeaseExtended) and reports its outcome (DecideComplete,
// DecideFail with the holder as worker). A lease that runs out is failed with code
// lease_expired (DecideExpire), so each attempt is leased once and has exactly one outcome.

// ErrTaskNotHeld means the task's attempt is no longer leased to anyone (its lease was
// expired, it ended, or a later attempt runs): a late heartbeat or outcome changes nothing.
// It is a conflict (409) whose message is safe to show.
var ErrTaskNotHeld error = &domain.ConflictError{Message: "the task's lease is no longer held: its attempt ended or was expired"}

// CodeLeaseExpired is the error code of an attempt whose worker stopped renewing its lease.
const CodeLeaseExpired = "lease_expired"

// LeaseExtended records a worker's heartbeat: its lease of Attempt now runs until LeaseUntil.
type LeaseExtended struct {
	ExecutionID string    `json:"executionId"`
	Attempt     int       `json:"attempt"`
	LeaseUntil  time.Time `json:"leaseUntil"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (LeaseExtended) EventType() string { return "ExecutionLeaseExtended" }

func init() { domain.Events.Register(LeaseExtended{}) }

// WorkerTask reports whether the execution's attempts are leased by workers instead of run
// by the executor.
func (s State) WorkerTask() bool { return s.Transport != nil && s.Transport.Type == TransportWorker }

// TaskID names attempt of execution id: opaque to workers, one per attempt.
func TaskID(id string, attempt int) string { return id + "." + strconv.Itoa(attempt) }

// ParseTaskID splits a task id into its execution and attempt; false for a malformed one.
func ParseTaskID(task string) (id string, attempt int, ok bool) {
	i := strings.LastIndexByte(task, '.')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(task[i+1:])
	if err != nil || n < 1 || n > 1000 {
		return "", 0, false
	}
	return task[:i], n, true
}

// HoldsTask reports whether attempt is the one leased now.
func (s State) HoldsTask(attempt int) bool {
	return s.WorkerTask() && s.holds(s.Worker, attempt)
}

// LeaseExpired reports whether a worker's lease ran out at now without an outcome.
func (s State) LeaseExpired(now time.Time) bool {
	return s.WorkerTask() && s.Status == StatusRunning && s.RetryAt.IsZero() && !now.Before(s.LeaseUntil)
}

// Leasable reports whether a worker may lease the next attempt at now: never leased, due for
// a retry, or holding an expired lease that the lease fails first (DecideLease).
func (s State) Leasable(now time.Time) bool {
	return s.WorkerTask() && s.Claimable(now)
}

// leaseExpiredError is the failure recorded for an attempt whose lease ran out.
var leaseExpiredError = json.RawMessage(`{"code":"lease_expired","message":"the worker did not renew its lease in time; the attempt is failed"}`)

// DecideExpire fails the leased attempt whose lease ran out at now (lease_expired): retried
// at once while attempts remain (or after the stage's retry policy's delay), else the
// execution fails.
func DecideExpire(s State, now time.Time) ([]domain.Event, error) {
	if !s.LeaseExpired(now) {
		return nil, ErrNotClaimable
	}
	return DecideFail(s, s.Worker, s.Attempt, leaseExpiredError, true, 0, now)
}

// DecideLease leases the next attempt to worker until now+lease. An expired lease is failed
// first, in the same decision; when that failure ends the execution, only it is returned, and
// the caller finds nothing leased.
func DecideLease(s State, worker string, lease time.Duration, now time.Time) ([]domain.Event, error) {
	if !s.Leasable(now) {
		return nil, ErrNotClaimable
	}
	var events []domain.Event
	if s.LeaseExpired(now) {
		expired, err := DecideExpire(s, now)
		if err != nil {
			return nil, err
		}
		events = expired
		for _, e := range expired {
			s = s.Evolve(e)
		}
		if s.Status.Terminal() || now.Before(s.RetryAt) {
			return events, nil
		}
	}
	return append(events, Started{ExecutionID: s.ID, RunID: s.RunID, Attempt: s.NextAttempt(), Worker: worker,
		LeaseUntil: now.Add(lease).UTC(), At: now.UTC()}), nil
}

// DecideExtend renews the lease of attempt until now+lease (never shortening it).
func DecideExtend(s State, attempt int, lease time.Duration, now time.Time) ([]domain.Event, error) {
	if !s.HoldsTask(attempt) {
		return nil, ErrTaskNotHeld
	}
	until := now.Add(lease).UTC()
	if until.Before(s.LeaseUntil) {
		until = s.LeaseUntil
	}
	return []domain.Event{LeaseExtended{ExecutionID: s.ID, Attempt: attempt, LeaseUntil: until, At: now.UTC()}}, nil
}
