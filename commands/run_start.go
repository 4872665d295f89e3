package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

// runIDSpace is the namespace of run ids derived from what started them (DerivedRunID).
var runIDSpace = uuid.MustParse("0d7c3c1e-5b8e-4a53-9a43-6f3d2f0a8c11")

// DerivedRunID is the run id of a start named by parts (a schedule's fire time, an event's
// id, a webhook delivery): the same parts give the same id, so a start repeated by a
// restart or by a second instance finds its run already written instead of starting another.
func DerivedRunID(parts ...string) string {
	b, _ := json.Marshal(parts) // a list of strings: cannot fail, and "a","b" != "a\x00b"
	return uuid.NewSHA1(runIDSpace, b).String()
}

// StartRun starts one run of a workflow from one of its trigger components other than a
// signed API call: a schedule's fire, an event, a webhook delivery.
type StartRun struct {
	WorkspaceID string
	WorkflowID  string
	// TriggerID is the trigger component the run starts from; its module must be one of
	// workflow.TriggerModules.
	TriggerID string
	// RunID is the new run's id, DerivedRunID of what started it.
	RunID string
	// Input is the trigger's output: an object.
	Input json.RawMessage
	// APIKeyID is the key that sent the start, "" when none did (a schedule, a webhook).
	APIKeyID string
}

// startRun starts the run c names with the workflow's definition as it is now, after the
// balance check every trigger passes. It reports whether this call wrote it: false, and no
// error, when a run of that id exists already. Package-level, so that each noun that starts
// runs (schedules, events, hooks) shares it without growing Workflows.
func startRun(ctx context.Context, w *Workflows, c StartRun) (TriggeredRun, bool, error) {
	started := TriggeredRun{RunID: c.RunID, JobID: run.StageID(c.RunID, c.TriggerID, run.NoIteration)}
	if err := domain.CheckStorableJSON("input", c.Input); err != nil {
		return started, false, err
	}
	wf, err := w.Workflow(ctx, c.WorkspaceID, c.WorkflowID)
	if err != nil {
		return started, false, err
	}
	if !triggerOf(wf.Definition, c.TriggerID) {
		return started, false, fmt.Errorf("start run: component %q of workflow %s is not a trigger: %w", c.TriggerID, c.WorkflowID, domain.ErrNotFound)
	}
	key, err := concurrencyKey(ctx, wf.Definition, c.Input)
	if err != nil {
		return started, false, err
	}
	if err := w.checkBalance(ctx, c.WorkspaceID, passCost(w.catalog.price(ctx, c.WorkspaceID), wf.Definition)); err != nil {
		return started, false, err
	}
	_, err = triggerRun(ctx, w, c.RunID, func(s run.State) ([]domain.Event, error) {
		return run.DecideTrigger(s, c.RunID, c.WorkspaceID, wf.ID, c.APIKeyID, c.TriggerID, wf.Definition, c.Input, key, edgeCondition(ctx), w.now())
	})
	if errors.Is(err, domain.ErrAlreadyExists) {
		return started, false, nil
	}
	if err != nil {
		return started, false, wrap("start run", err)
	}
	if w.wake != nil {
		w.wake(c.RunID)
	}
	return started, true, nil
}

// triggerOf reports whether id is a trigger component of d.
func triggerOf(d workflow.Definition, id string) bool {
	for _, comp := range d.Components {
		if comp.ID == id {
			return workflow.IsTrigger(comp.Module)
		}
	}
	return false
}

// Delivery is one payload for an ON_EVENT or ON_WEBHOOK trigger component: an event sent to
// POST /v1/sdk/events or a delivery to the component's hook URL.
type Delivery struct {
	WorkspaceID string
	WorkflowID  string
	TriggerID   string
	// ID names the delivery (the event's id, the hook delivery's id): delivered twice, it
	// starts its run once.
	ID      string
	Payload json.RawMessage
}

// deliver hands d to its trigger component: it starts the delivery's run, whose id derives
// from the delivery. (A component's debounce, when it has one, gathers deliveries here
// instead.) started is empty when the delivery started no run now.
func deliver(ctx context.Context, w *Workflows, d Delivery) (started []TriggeredRun, err error) {
	r, _, err := startRun(ctx, w, StartRun{WorkspaceID: d.WorkspaceID, WorkflowID: d.WorkflowID, TriggerID: d.TriggerID,
		RunID: DerivedRunID("delivery", d.WorkflowID, d.TriggerID, d.ID), Input: d.Payload})
	if err != nil {
		return nil, err
	}
	return []TriggeredRun{r}, nil
}
