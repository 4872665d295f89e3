// Package schedule is the record of one ON_SCHEDULE component (docs/workflows.md,
// "Schedules"): a stream of its own, schedule-<workflowId>.<componentId>, holding whether it is
// paused and what each fire came to. The fire times themselves are the component's config
// (workflow.Schedule); this stream is the decision made at each one, so that a fire decided by
// one instance is not decided again by another, or by the same one after a restart: a fire
// is appended only after the last one recorded, at the revision read.
//
// Starting a fire's run is the command's (commands/schedule.go): it records the fire here
// first, then starts the run whose id derives from the fire time. A crash between the two
// leaves the run unstarted; the next lead starts the last recorded run again, a no-op when
// it exists.
package schedule

import (
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Category is the stream category: schedule-<workflowId>.<componentId>.
const Category = "schedule"

// What a fire came to.
const (
	// OutcomeStarted: the fire's run was started.
	OutcomeStarted = "started"
	// OutcomeSkipped: the previous run was still running (overlap skip, or queue_one with a
	// fire pending already).
	OutcomeSkipped = "skipped"
	// OutcomeQueued: pending until the previous run ends (overlap queue_one).
	OutcomeQueued = "queued"
)

// Paused records that the schedule stops firing.
type Paused struct {
	WorkflowID  string    `json:"workflowId"`
	ComponentID string    `json:"componentId"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (Paused) EventType() string { return "SchedulePaused" }

// Resumed records that the schedule fires again, from its next fire time after At: the fires
// due while it was paused do not run.
type Resumed struct {
	WorkflowID  string    `json:"workflowId"`
	ComponentID string    `json:"componentId"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (Resumed) EventType() string { return "ScheduleResumed" }

// Fired records what the fire at FireTime came to.
type Fired struct {
	WorkflowID  string    `json:"workflowId"`
	ComponentID string    `json:"componentId"`
	FireTime    time.Time `json:"fireTime"`
	Outcome     string    `json:"outcome"`
	// RunID is the run started (OutcomeStarted), "" otherwise.
	RunID string `json:"runId,omitempty"`
	// Cancelled is the previous run, cancelled for this one (overlap cancel_previous).
	Cancelled string `json:"cancelled,omitempty"`
	// Dequeued marks the start of a fire queued earlier.
	Dequeued bool      `json:"dequeued,omitempty"`
	At       time.Time `json:"at"`
}

// EventType names the event in the log.
func (Fired) EventType() string { return "ScheduleFired" }

// Triggered records a run started by hand (POST .../trigger), outside the fire times.
type Triggered struct {
	WorkflowID  string    `json:"workflowId"`
	ComponentID string    `json:"componentId"`
	RunID       string    `json:"runId"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (Triggered) EventType() string { return "ScheduleTriggered" }

func init() { domain.Events.Register(Paused{}, Resumed{}, Fired{}, Triggered{}) }

// State is a schedule folded from its stream.
type State struct {
	Paused bool
	// Cursor is the latest fire time decided, or the time of the last resume: only fires
	// after it are due.
	Cursor time.Time
	// LastRunID is the run the schedule started last (a fire's or a trigger's): the one an
	// overlap policy asks about.
	LastRunID string
	// Queued is the fire time pending (queue_one), zero when none is.
	Queued time.Time
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Paused:
		s.Paused = true
	case Resumed:
		s.Paused = false
		if ev.At.After(s.Cursor) {
			s.Cursor = ev.At
		}
	case Fired:
		if ev.FireTime.After(s.Cursor) {
			s.Cursor = ev.FireTime
		}
		switch {
		case ev.Outcome == OutcomeQueued:
			s.Queued = ev.FireTime
		case ev.Outcome == OutcomeStarted && ev.Dequeued:
			s.Queued, s.LastRunID = time.Time{}, ev.RunID
		case ev.Outcome == OutcomeStarted:
			s.LastRunID = ev.RunID
		}
	case Triggered:
		s.LastRunID = ev.RunID
	}
	return s
}

// Fire is one fire time to decide, and what the decision needs to know.
type Fire struct {
	WorkflowID, ComponentID string
	FireTime                time.Time
	// RunID is the run the fire would start (derived from the fire time).
	RunID string
	// Overlap is the schedule's policy (workflow.OverlapSkip and kin).
	Overlap string
	// PreviousRunning reports whether the schedule's last run (State.LastRunID) is still
	// running.
	PreviousRunning bool
}

// DecideFire decides what the fire f comes to: nothing when the schedule is paused or the fire
// time was decided already, else one Fired.
func DecideFire(s State, f Fire, now time.Time) ([]domain.Event, error) {
	if s.Paused || !f.FireTime.After(s.Cursor) {
		return nil, nil
	}
	ev := Fired{WorkflowID: f.WorkflowID, ComponentID: f.ComponentID, FireTime: f.FireTime.UTC(), Outcome: OutcomeStarted, RunID: f.RunID, At: now.UTC()}
	if f.PreviousRunning {
		switch f.Overlap {
		case workflow.OverlapAllow:
		case workflow.OverlapCancelPrevious:
			ev.Cancelled = s.LastRunID
		case workflow.OverlapQueueOne:
			ev.RunID = ""
			ev.Outcome = OutcomeQueued
			if !s.Queued.IsZero() {
				ev.Outcome = OutcomeSkipped
			}
		default:
			ev.RunID, ev.Outcome = "", OutcomeSkipped
		}
	}
	return []domain.Event{ev}, nil
}

// DecideDequeue starts the fire pending (queue_one) once the previous run has ended: runID is
// the pending fire's run.
func DecideDequeue(s State, workflowID, componentID, runID string, previousRunning bool, now time.Time) ([]domain.Event, error) {
	if s.Paused || s.Queued.IsZero() || previousRunning {
		return nil, nil
	}
	return []domain.Event{Fired{WorkflowID: workflowID, ComponentID: componentID, FireTime: s.Queued, Outcome: OutcomeStarted,
		RunID: runID, Dequeued: true, At: now.UTC()}}, nil
}

// DecidePause pauses a running schedule; pausing a paused one changes nothing.
func DecidePause(s State, workflowID, componentID string, now time.Time) ([]domain.Event, error) {
	if s.Paused {
		return nil, nil
	}
	return []domain.Event{Paused{WorkflowID: workflowID, ComponentID: componentID, At: now.UTC()}}, nil
}

// DecideResume resumes a paused schedule; resuming a running one changes nothing.
func DecideResume(s State, workflowID, componentID string, now time.Time) ([]domain.Event, error) {
	if !s.Paused {
		return nil, nil
	}
	return []domain.Event{Resumed{WorkflowID: workflowID, ComponentID: componentID, At: now.UTC()}}, nil
}

// DecideTrigger records a run started by hand.
func DecideTrigger(s State, workflowID, componentID, runID string, now time.Time) ([]domain.Event, error) {
	return []domain.Event{Triggered{WorkflowID: workflowID, ComponentID: componentID, RunID: runID, At: now.UTC()}}, nil
}
