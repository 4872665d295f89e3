// Package bulk is a bulk action on the runs of a workflow: cancel them, or re-run them
// (docs/workflows.md, "Bulk actions"). A bulk lives on a stream of its own, bulk-<id>. Its
// Requested event fixes the runs it acts on, matched when it was asked for, so a bulk resumed
// after a crash acts on the same runs; each Progressed event marks the next runs, in order,
// with what became of them, so a run is marked once; Completed ends it once every run is.
//
// Acting on a run is the command's (commands/bulk.go): it cancels or re-runs the next
// unmarked runs, then records them here. A crash between the two leaves runs acted on but
// unmarked; acting again finds them so (a cancelled run is terminal, a re-run's new run has an
// id derived from the bulk and the run, RerunID), and marks them without a second action.
package bulk

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category: bulk-<bulkId>.
const Category = "bulk"

// MaxRuns bounds the runs one bulk acts on: a filter that matches more is refused (400), to be
// narrowed by its times.
const MaxRuns = 10000

// MaxReasonLength bounds a bulk's reason (a cancel's reason, recorded on each run).
const MaxReasonLength = 1000

// Action is what a bulk does to each run.
type Action string

// The actions.
const (
	ActionCancel Action = "cancel"
	ActionRerun  Action = "rerun"
)

// Status is where a bulk is: CREATED until a run is marked, RUNNING, then COMPLETED once every
// run is. Like SPEC.md's statuses, upper case; a bulk has no FAILED: the runs it could not act
// on are counted in failed.
type Status string

// The statuses.
const (
	StatusCreated   Status = "CREATED"
	StatusRunning   Status = "RUNNING"
	StatusCompleted Status = "COMPLETED"
)

// The run statuses a filter may name (SPEC.md 2.4).
const (
	runCreated   = "CREATED"
	runExecuting = "EXECUTING"
	runCompleted = "COMPLETED"
	runFailed    = "FAILED"
)

// Filter selects the runs of the workflow a bulk acts on; empty fields do not narrow.
type Filter struct {
	// Status is one run status; without it a cancel takes the runs not ended (CREATED and
	// EXECUTING) and a re-run the FAILED ones.
	Status string `json:"status,omitempty"`
	// CreatedAfter and CreatedBefore bound the runs' creation time (inclusive, exclusive).
	CreatedAfter  *time.Time `json:"createdAfter,omitempty"`
	CreatedBefore *time.Time `json:"createdBefore,omitempty"`
}

// Statuses are the run statuses the filter matches for action a.
func (f Filter) Statuses(a Action) []string {
	if f.Status != "" {
		return []string{f.Status}
	}
	if a == ActionCancel {
		return []string{runCreated, runExecuting}
	}
	return []string{runFailed}
}

// Match is what a bulk's filter selects from the runs read model: the runs of one workflow
// in statuses, created in [CreatedAfter, CreatedBefore), oldest first, at most Limit.
type Match struct {
	WorkspaceID   string
	WorkflowID    string
	Statuses      []string
	CreatedAfter  *time.Time
	CreatedBefore *time.Time
	Limit         int
}

// MatchOf is the match of action a's filter f on a workflow, bounded to one run more than
// MaxRuns, so that a filter matching too many is told.
func MatchOf(workspaceID, workflowID string, a Action, f Filter) Match {
	return Match{WorkspaceID: workspaceID, WorkflowID: workflowID, Statuses: f.Statuses(a),
		CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, Limit: MaxRuns + 1}
}

// Check validates a bulk's action, filter and reason, naming the field at fault.
func Check(a Action, f Filter, reason string) error {
	if a != ActionCancel && a != ActionRerun {
		return domain.Invalid("action", "must be %q or %q", ActionCancel, ActionRerun)
	}
	switch f.Status {
	case "":
	case runCreated, runExecuting:
		if a == ActionRerun {
			return domain.Invalid("filter.status", "a re-run takes ended runs: COMPLETED or FAILED, not %s", f.Status)
		}
	case runCompleted, runFailed:
		if a == ActionCancel {
			return domain.Invalid("filter.status", "a cancel takes runs not ended: CREATED or EXECUTING, not %s", f.Status)
		}
	default:
		return domain.Invalid("filter.status", "must be one of CREATED, EXECUTING, COMPLETED, FAILED")
	}
	if f.CreatedAfter != nil && f.CreatedBefore != nil && f.CreatedAfter.After(*f.CreatedBefore) {
		return domain.Invalid("filter.createdAfter", "must not be after filter.createdBefore")
	}
	if len(reason) > MaxReasonLength {
		return domain.Invalid("reason", "must be at most %d characters", MaxReasonLength)
	}
	return nil
}

// Request is a bulk as asked for, with the runs the filter matched.
type Request struct {
	BulkID      string
	WorkspaceID string
	WorkflowID  string
	APIKeyID    string
	Action      Action
	Filter      Filter
	Reason      string
	RunIDs      []string
}

// Result is what became of one run: Error empty when the action was taken; NewRunID is a
// re-run's new run.
type Result struct {
	RunID    string `json:"runId"`
	NewRunID string `json:"newRunId,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Requested starts a bulk on RunIDs, the runs its filter matched.
type Requested struct {
	BulkID      string    `json:"bulkId"`
	WorkspaceID string    `json:"workspaceId"`
	WorkflowID  string    `json:"workflowId"`
	APIKeyID    string    `json:"apiKeyId,omitempty"`
	Action      Action    `json:"action"`
	Filter      Filter    `json:"filter"`
	Reason      string    `json:"reason,omitempty"`
	RunIDs      []string  `json:"runIds"`
	At          time.Time `json:"at"`
}

// Progressed marks the next len(Results) runs of the bulk, in order.
type Progressed struct {
	BulkID  string    `json:"bulkId"`
	Results []Result  `json:"results"`
	At      time.Time `json:"at"`
}

// Completed ends a bulk once every run is marked.
type Completed struct {
	BulkID string    `json:"bulkId"`
	Done   int       `json:"done"`
	Failed int       `json:"failed"`
	At     time.Time `json:"at"`
}

// EventType names the event in the log.
func (Requested) EventType() string { return "BulkRequested" }

// EventType names the event in the log.
func (Progressed) EventType() string { return "BulkProgressed" }

// EventType names the event in the log.
func (Completed) EventType() string { return "BulkCompleted" }

func init() { domain.Events.Register(Requested{}, Progressed{}, Completed{}) }

// MaxFailures bounds the failures a bulk's state keeps to show (the count is exact).
const MaxFailures = 100

// State is a bulk's stream folded.
type State struct {
	Exists      bool
	ID          string
	WorkspaceID string
	WorkflowID  string
	APIKeyID    string
	Action      Action
	Filter      Filter
	Reason      string
	RunIDs      []string
	// Marked is how many of RunIDs are marked: the next to act on is RunIDs[Marked].
	Marked      int
	Done        int
	Failed      int
	Failures    []Result
	Status      Status
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Requested:
		s = State{Exists: true, ID: ev.BulkID, WorkspaceID: ev.WorkspaceID, WorkflowID: ev.WorkflowID, APIKeyID: ev.APIKeyID,
			Action: ev.Action, Filter: ev.Filter, Reason: ev.Reason, RunIDs: ev.RunIDs, Status: StatusCreated,
			CreatedAt: ev.At, UpdatedAt: ev.At}
	case Progressed:
		s.Marked += len(ev.Results)
		for _, r := range ev.Results {
			if r.Error == "" {
				s.Done++
				continue
			}
			s.Failed++
			if len(s.Failures) < MaxFailures {
				s.Failures = append(slices.Clip(s.Failures), r)
			}
		}
		s.Status, s.UpdatedAt = StatusRunning, ev.At
	case Completed:
		s.Status, s.UpdatedAt, s.CompletedAt = StatusCompleted, ev.At, ev.At
	}
	return s
}

// Next is the next up to n runs to act on.
func (s State) Next(n int) []string {
	if s.Status == StatusCompleted || s.Marked >= len(s.RunIDs) {
		return nil
	}
	return s.RunIDs[s.Marked:min(len(s.RunIDs), s.Marked+n)]
}

// DecideRequest starts bulk r.BulkID; one that exists is domain.ErrAlreadyExists. A bulk
// matching no run completes at once.
func DecideRequest(s State, r Request, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, fmt.Errorf("bulk %s: %w", r.BulkID, domain.ErrAlreadyExists)
	}
	if err := Check(r.Action, r.Filter, r.Reason); err != nil {
		return nil, err
	}
	if len(r.RunIDs) > MaxRuns {
		return nil, domain.Invalid("filter", "matches more than %d runs; narrow it with createdAfter and createdBefore", MaxRuns)
	}
	ids := r.RunIDs
	if ids == nil {
		ids = []string{}
	}
	events := []domain.Event{Requested{BulkID: r.BulkID, WorkspaceID: r.WorkspaceID, WorkflowID: r.WorkflowID,
		APIKeyID: r.APIKeyID, Action: r.Action, Filter: r.Filter, Reason: r.Reason, RunIDs: ids, At: now.UTC()}}
	if len(ids) == 0 {
		events = append(events, Completed{BulkID: r.BulkID, At: now.UTC()})
	}
	return events, nil
}

// DecideProgress marks the next runs with results, which must be theirs in order (another
// instance marking them first is domain.ErrConflict), and completes the bulk with its last.
func DecideProgress(s State, results []Result, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	next := s.Next(len(results))
	if len(results) == 0 || len(next) != len(results) {
		return nil, domain.Conflict("bulk %s: these runs are marked already", s.ID)
	}
	for i, r := range results {
		if r.RunID != next[i] {
			return nil, domain.Conflict("bulk %s: run %s is not the next to mark", s.ID, r.RunID)
		}
	}
	events := []domain.Event{Progressed{BulkID: s.ID, Results: results, At: now.UTC()}}
	if s.Marked+len(results) == len(s.RunIDs) {
		after := s.Evolve(events[0])
		events = append(events, Completed{BulkID: s.ID, Done: after.Done, Failed: after.Failed, At: now.UTC()})
	}
	return events, nil
}

var idNamespace = uuid.MustParse("6f1d2b8e-3c57-4f7a-9a49-0b1c2d3e4f50")

// RerunID is the id of the run bulk bulkID's re-run of run runID starts: derived, so acting
// again after a crash finds the re-run it started instead of starting another.
func RerunID(bulkID, runID string) string {
	return uuid.NewSHA1(idNamespace, []byte("rerun/"+bulkID+"/"+runID)).String()
}

// Detail is a bulk as GET /v1/sdk/workflows/bulk/:bulkId shows it (docs/workflows.md).
type Detail struct {
	ID          string     `json:"id"`
	WorkflowID  string     `json:"workflowId"`
	Action      Action     `json:"action"`
	Filter      Filter     `json:"filter"`
	Reason      string     `json:"reason,omitempty"`
	Status      Status     `json:"status"`
	Matched     int        `json:"matched"`
	Done        int        `json:"done"`
	Failed      int        `json:"failed"`
	Failures    []Result   `json:"failures"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	CompletedAt *time.Time `json:"completedAt"`
}

// Detail is the bulk's view.
func (s State) Detail() Detail {
	d := Detail{ID: s.ID, WorkflowID: s.WorkflowID, Action: s.Action, Filter: s.Filter, Reason: s.Reason, Status: s.Status,
		Matched: len(s.RunIDs), Done: s.Done, Failed: s.Failed, Failures: s.Failures, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if d.Failures == nil {
		d.Failures = []Result{}
	}
	if !s.CompletedAt.IsZero() {
		at := s.CompletedAt
		d.CompletedAt = &at
	}
	return d
}
