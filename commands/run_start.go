package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
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
	wf, err := w.Workflow(ctx, c.WorkspaceID, c.WorkflowID)
	if err != nil {
		return TriggeredRun{RunID: c.RunID, JobID: run.StageID(c.RunID, c.TriggerID, run.NoIteration)}, false, err
	}
	return startRunOf(ctx, w, wf, c)
}

// startRunOf is startRun of workflow wf as the caller has just read it.
func startRunOf(ctx context.Context, w *Workflows, wf workflow.State, c StartRun) (TriggeredRun, bool, error) {
	started := TriggeredRun{RunID: c.RunID, JobID: run.StageID(c.RunID, c.TriggerID, run.NoIteration)}
	if err := domain.CheckStorableJSON("input", c.Input); err != nil {
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
	st, dispatched, err := triggerRunStepped(ctx, w, c.RunID, true, nil, eventstore.StreamAppend{}, func(s run.State) ([]domain.Event, error) {
		return run.DecideTrigger(s, c.RunID, c.WorkspaceID, wf.ID, c.APIKeyID, c.TriggerID, wf.Definition, c.Input, key, edgeCondition(ctx), w.now())
	})
	if errors.Is(err, domain.ErrAlreadyExists) {
		return started, false, nil
	}
	if err != nil {
		return started, false, wrap("start run", err)
	}
	if w.wake != nil {
		w.wake(st, dispatched)
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
// from the delivery, or, when the component has a debounce, gathers the delivery into its
// key's window (debounce.go), starting the window's run when the delivery fills it. started
// is empty when the delivery started no run now.
func deliver(ctx context.Context, w *Workflows, d Delivery) (started []TriggeredRun, err error) {
	wf, err := w.Workflow(ctx, d.WorkspaceID, d.WorkflowID)
	if err != nil {
		return nil, err
	}
	r, err := deliverTo(ctx, w, wf, d, time.Time{})
	if err != nil || !r.Started {
		return nil, err
	}
	return []TriggeredRun{r.TriggeredRun}, nil
}

// delivered is where a delivery went: its run, or the debounce window's run that will carry
// it (Debounced), and whether that run has started.
type delivered struct {
	TriggeredRun
	Debounced bool
	Started   bool
}

// deliverTo is deliver to workflow wf as the caller has just read it. again, when not zero,
// is when d was first received: it is being delivered again after an interruption, so a
// debounced delivery first looks for itself in its key's windows since (gather).
func deliverTo(ctx context.Context, w *Workflows, wf workflow.State, d Delivery, again time.Time) (delivered, error) {
	db, err := debounceOf(wf.Definition, d.TriggerID)
	if err != nil {
		return delivered{}, err
	}
	if db != nil {
		return gather(ctx, w, d, *db, again)
	}
	id := DerivedRunID("delivery", d.WorkflowID, d.TriggerID, d.ID)
	if !again.IsZero() {
		// Delivered before: its run, when it exists, is the answer, whatever the balance now.
		if l, err := load(ctx, w, RunStream(id), runAgg); err == nil && l.exists {
			return delivered{TriggeredRun: TriggeredRun{RunID: id, JobID: stageOf(id, d.TriggerID)}, Started: true}, nil
		}
	}
	r, _, err := startRunOf(ctx, w, wf, StartRun{WorkspaceID: d.WorkspaceID, WorkflowID: d.WorkflowID, TriggerID: d.TriggerID,
		RunID: id, Input: d.Payload})
	if err != nil {
		return delivered{}, err
	}
	return delivered{TriggeredRun: r, Started: true}, nil
}
