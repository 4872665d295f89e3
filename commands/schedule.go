package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/schedule"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
)

var scheduleAgg = aggregate[schedule.State]{evolve: schedule.State.Evolve}

// maxFiresPerAdvance bounds the fires one AdvanceSchedules decides per schedule (a long
// catch-up): the rest are decided by the next call, which the plan asks for at once.
const maxFiresPerAdvance = 100

// ScheduleStream is the stream of a workflow's ON_SCHEDULE component.
func ScheduleStream(workflowID, componentID string) string {
	return eventstore.StreamName(schedule.Category, workflowID+"."+componentID)
}

// ScheduleRunID is the id of the run a schedule's fire at fireTime starts: every instance, and
// every restart, derives the same one.
func ScheduleRunID(workflowID, componentID string, fireTime time.Time) string {
	return DerivedRunID("schedule", workflowID, componentID, fireTime.UTC().Format(time.RFC3339Nano))
}

// ScheduleView is one ON_SCHEDULE component as GET .../schedules shows it.
type ScheduleView struct {
	ComponentID string `json:"componentId"`
	Name        string `json:"name"`
	Cron        string `json:"cron,omitempty"`
	Every       string `json:"every,omitempty"`
	Timezone    string `json:"timezone"`
	Overlap     string `json:"overlap"`
	CatchUp     string `json:"catchUp,omitempty"`
	Paused      bool   `json:"paused"`
	// LastRunID is the run the schedule started last, "" before its first.
	LastRunID string `json:"lastRunId,omitempty"`
	// NextFires are the next 10 fire times (before jitter), paused or not.
	NextFires []time.Time `json:"nextFires"`
}

// SchedulePlan is what AdvanceSchedules left a schedule waiting for.
type SchedulePlan struct {
	WorkflowID  string
	ComponentID string
	// Wake is when the schedule next has a fire to decide (its time plus jitter); zero when it
	// has none (paused, or a cron that never fires again).
	Wake time.Time
	// WaitRun is the run whose end starts the fire queued behind it (overlap queue_one).
	WaitRun string
}

// Schedules lists a workflow's ON_SCHEDULE components with their next fire times.
func (h *Schedules) Schedules(ctx context.Context, workspaceID, workflowID string) ([]ScheduleView, error) {
	wf, err := h.workflows.Workflow(ctx, workspaceID, workflowID)
	if err != nil {
		return nil, err
	}
	views := []ScheduleView{}
	for _, c := range wf.Definition.Components {
		if c.Module != workflow.ModuleOnSchedule {
			continue
		}
		v, err := h.view(ctx, wf, c)
		if err != nil {
			return nil, err
		}
		views = append(views, v)
	}
	return views, nil
}

func (h *Schedules) view(ctx context.Context, wf workflow.State, c workflow.Component) (ScheduleView, error) {
	sched, err := workflow.ParseSchedule(c.Config)
	if err != nil {
		return ScheduleView{}, err
	}
	l, err := load(ctx, h, ScheduleStream(wf.ID, c.ID), scheduleAgg)
	if err != nil {
		return ScheduleView{}, err
	}
	v := ScheduleView{ComponentID: c.ID, Name: c.Name, Cron: sched.Cron, Every: sched.Every, Timezone: sched.Timezone,
		Overlap: sched.Overlap(), CatchUp: sched.CatchUp, Paused: l.state.Paused, LastRunID: l.state.LastRunID,
		NextFires: sched.FireTimes(h.now().UTC(), 10)}
	if v.Timezone == "" {
		v.Timezone = "UTC"
	}
	return v, nil
}

// scheduleComponent finds the ON_SCHEDULE component id of a live workflow of the workspace.
func (h *Schedules) scheduleComponent(ctx context.Context, workspaceID, workflowID, componentID string) (workflow.State, workflow.Component, error) {
	wf, err := h.workflows.Workflow(ctx, workspaceID, workflowID)
	if err != nil {
		return wf, workflow.Component{}, err
	}
	c, ok := wf.Component(componentID)
	if !ok || c.Module != workflow.ModuleOnSchedule {
		return wf, c, fmt.Errorf("schedule component %q of workflow %s: %w", componentID, workflowID, domain.ErrNotFound)
	}
	return wf, c, nil
}

// PauseSchedule stops a schedule firing until it is resumed; pausing a paused one is a no-op.
func (h *Schedules) PauseSchedule(ctx context.Context, workspaceID, workflowID, componentID string) (ScheduleView, error) {
	return h.change(ctx, workspaceID, workflowID, componentID, func(s schedule.State) ([]domain.Event, error) {
		return schedule.DecidePause(s, workflowID, componentID, h.now())
	})
}

// ResumeSchedule has a paused schedule fire again from its next fire time: the fires due while
// it was paused do not run.
func (h *Schedules) ResumeSchedule(ctx context.Context, workspaceID, workflowID, componentID string) (ScheduleView, error) {
	return h.change(ctx, workspaceID, workflowID, componentID, func(s schedule.State) ([]domain.Event, error) {
		return schedule.DecideResume(s, workflowID, componentID, h.now())
	})
}

func (h *Schedules) change(ctx context.Context, workspaceID, workflowID, componentID string, decide func(schedule.State) ([]domain.Event, error)) (ScheduleView, error) {
	wf, c, err := h.scheduleComponent(ctx, workspaceID, workflowID, componentID)
	if err != nil {
		return ScheduleView{}, err
	}
	if _, err := execute(ctx, h, ScheduleStream(workflowID, componentID), scheduleAgg, decide); err != nil {
		return ScheduleView{}, wrap("schedule", err)
	}
	return h.view(ctx, wf, c)
}

// TriggerSchedule starts one run of the schedule now, whatever its fire times, overlap policy
// or pause: the run its overlap policy asks about next. apiKeyID is the key that asked.
func (h *Schedules) TriggerSchedule(ctx context.Context, workspaceID, workflowID, componentID, apiKeyID string) (TriggeredRun, error) {
	_, c, err := h.scheduleComponent(ctx, workspaceID, workflowID, componentID)
	if err != nil {
		return TriggeredRun{}, err
	}
	sched, err := workflow.ParseSchedule(c.Config)
	if err != nil {
		return TriggeredRun{}, err
	}
	runID := DerivedRunID("schedule", workflowID, componentID, "trigger", uuid.NewString())
	started, _, err := startRun(ctx, h.workflows, StartRun{WorkspaceID: workspaceID, WorkflowID: workflowID, TriggerID: componentID,
		RunID: runID, Input: sched.Body(), APIKeyID: apiKeyID})
	if err != nil {
		return started, err
	}
	_, err = execute(ctx, h, ScheduleStream(workflowID, componentID), scheduleAgg, func(s schedule.State) ([]domain.Event, error) {
		return schedule.DecideTrigger(s, workflowID, componentID, runID, h.now())
	})
	return started, wrap("trigger schedule", err)
}

// AdvanceSchedules decides the fires of workflowID's schedules due by now, starts their runs,
// and says when each schedule next needs deciding. With restart (a new lead), it first starts
// each schedule's last recorded run again, which a crash between recording a fire and starting
// its run leaves unstarted (a no-op when it exists). A deleted or unknown workflow has no
// schedules. The error is the first one met; the plans of the other schedules still come back.
func (h *Schedules) AdvanceSchedules(ctx context.Context, workflowID string, restart bool) ([]SchedulePlan, error) {
	if _, err := uuid.Parse(workflowID); err != nil {
		return nil, nil
	}
	l, err := load(ctx, h, WorkflowStream(workflowID), workflowAgg)
	if err != nil {
		return nil, err
	}
	wf := l.state
	if !wf.Live() {
		return nil, nil
	}
	var plans []SchedulePlan
	var first error
	for _, c := range wf.Definition.Components {
		if c.Module != workflow.ModuleOnSchedule {
			continue
		}
		p, err := h.advance(ctx, wf, c, restart)
		if err != nil && first == nil {
			first = fmt.Errorf("schedule %s.%s: %w", wf.ID, c.ID, err)
		}
		plans = append(plans, p)
	}
	return plans, first
}

// advance decides one schedule's queued and due fires.
func (h *Schedules) advance(ctx context.Context, wf workflow.State, c workflow.Component, restart bool) (SchedulePlan, error) {
	plan := SchedulePlan{WorkflowID: wf.ID, ComponentID: c.ID}
	sched, err := workflow.ParseSchedule(c.Config)
	if err != nil {
		return plan, err
	}
	stream := ScheduleStream(wf.ID, c.ID)
	l, err := load(ctx, h, stream, scheduleAgg)
	if err != nil {
		return plan, err
	}
	st := l.state
	if restart && st.LastRunID != "" {
		if err := h.start(ctx, wf, c.ID, st.LastRunID, sched); err != nil {
			return plan, err
		}
	}
	if st, err = h.dequeue(ctx, wf, c.ID, sched, st); err != nil {
		return plan, err
	}
	now := h.now().UTC()
	since := st.Cursor
	if c.UpdatedAt.After(since) {
		since = c.UpdatedAt // fires from before the schedule was set are not its own
	}
	due := sched.Due(wf.ID+"."+c.ID, since, now, maxFiresPerAdvance)
	for _, fire := range due {
		if st, err = h.fire(ctx, wf, c.ID, sched, fire); err != nil {
			return plan, err
		}
	}
	if !st.Queued.IsZero() {
		plan.WaitRun = st.LastRunID
	}
	switch {
	case st.Paused:
	case len(due) == maxFiresPerAdvance:
		plan.Wake = now
	default:
		from := st.Cursor
		if floor := now.Add(-sched.Window()); from.Before(floor) {
			from = floor
		}
		if since.After(from) {
			from = since
		}
		if next := sched.Next(from); !next.IsZero() {
			plan.Wake = next.Add(sched.Jitter(wf.ID+"."+c.ID, next))
		}
	}
	return plan, nil
}

// fire decides the fire at fireTime and acts on it: cancels the run it replaces, starts its
// run. A fire another instance decided already is not decided again; its run is started
// again (a no-op when it exists), in case that instance stopped before it could.
func (h *Schedules) fire(ctx context.Context, wf workflow.State, componentID string, sched workflow.Schedule, fireTime time.Time) (schedule.State, error) {
	runID := ScheduleRunID(wf.ID, componentID, fireTime)
	var decided []domain.Event
	st, _, err := executeFold(ctx, h, ScheduleStream(wf.ID, componentID), scheduleAgg, func(s schedule.State) ([]domain.Event, error) {
		running, err := h.running(ctx, s.LastRunID)
		if err != nil {
			return nil, err
		}
		decided, err = schedule.DecideFire(s, schedule.Fire{WorkflowID: wf.ID, ComponentID: componentID, FireTime: fireTime,
			RunID: runID, Overlap: sched.Overlap(), PreviousRunning: running}, h.now())
		return decided, err
	})
	if err != nil {
		return st, wrap("fire schedule", err)
	}
	for _, e := range decided {
		if f, ok := e.(schedule.Fired); ok && f.Cancelled != "" {
			if _, err := h.workflows.CancelRun(ctx, f.Cancelled, "cancelled by the next fire of schedule "+componentID+" (overlap cancel_previous)"); err != nil &&
				!errors.Is(err, domain.ErrConflict) && !errors.Is(err, domain.ErrNotFound) {
				return st, err
			}
		}
	}
	if st.LastRunID == runID {
		return st, h.start(ctx, wf, componentID, runID, sched)
	}
	return st, nil
}

// dequeue starts the fire queued (queue_one) once the run ahead of it has ended.
func (h *Schedules) dequeue(ctx context.Context, wf workflow.State, componentID string, sched workflow.Schedule, st schedule.State) (schedule.State, error) {
	if st.Queued.IsZero() {
		return st, nil
	}
	runID := ScheduleRunID(wf.ID, componentID, st.Queued)
	st, _, err := executeFold(ctx, h, ScheduleStream(wf.ID, componentID), scheduleAgg, func(s schedule.State) ([]domain.Event, error) {
		running, err := h.running(ctx, s.LastRunID)
		if err != nil {
			return nil, err
		}
		return schedule.DecideDequeue(s, wf.ID, componentID, ScheduleRunID(wf.ID, componentID, s.Queued), running, h.now())
	})
	if err != nil {
		return st, wrap("dequeue schedule", err)
	}
	if st.LastRunID == runID {
		return st, h.start(ctx, wf, componentID, runID, sched)
	}
	return st, nil
}

// running reports whether run id has started and not finished.
func (h *Schedules) running(ctx context.Context, id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	r, err := h.workflows.Run(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !r.Status.Terminal(), nil
}

// start starts the schedule's run runID, a no-op when it exists. An existing run is looked
// for first: starting it again would pass the balance check before finding it, and a
// workspace short of credits would fail a fire that had already run.
func (h *Schedules) start(ctx context.Context, wf workflow.State, componentID, runID string, sched workflow.Schedule) error {
	if _, err := h.workflows.Run(ctx, runID); err == nil || !errors.Is(err, domain.ErrNotFound) {
		return err
	}
	_, _, err := startRun(ctx, h.workflows, StartRun{WorkspaceID: wf.WorkspaceID, WorkflowID: wf.ID, TriggerID: componentID,
		RunID: runID, Input: sched.Body()})
	return err
}
