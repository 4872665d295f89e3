package commands

import (
	"context"
	"errors"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

// checkChildWorkflows refuses a definition whose RUN_WORKFLOW components name a workflow that
// is not a live one of the workspace (another workspace's reads as unknown), naming the field.
func checkChildWorkflows(ctx context.Context, h *Workflows, workspaceID string, d workflow.Definition) error {
	for _, ref := range d.ChildWorkflows() {
		_, err := h.Workflow(ctx, workspaceID, ref.WorkflowID)
		if errors.Is(err, domain.ErrNotFound) {
			return domain.Invalid(ref.Field, "names no workflow of this workspace")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkChildComponent refuses a component update that points a RUN_WORKFLOW at a workflow
// that is not one of the workspace's.
func checkChildComponent(ctx context.Context, h *Workflows, s workflow.State, events []domain.Event) error {
	for _, e := range events {
		ev, ok := e.(workflow.ComponentUpdated)
		c, _ := s.Component(ev.ComponentID)
		if !ok || c.Module != workflow.ModuleRunWorkflow {
			continue
		}
		rc, _ := workflow.ParseRunWorkflow(ev.Config)
		_, err := h.Workflow(ctx, s.WorkspaceID, rc.WorkflowID)
		if errors.Is(err, domain.ErrNotFound) {
			return domain.Invalid("config.workflowId", "names no workflow of this workspace")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// startChild starts the child run of a dispatched RUN_WORKFLOW stage, or fails the stage when
// it cannot start (the workflow is gone, a cycle, too deep). A child already started (a step
// retried after a crash) is left as it is: its id is derived from the stage.
func startChild(ctx context.Context, h *Workflows, r *run.State, st run.Stage) error {
	if _, err := h.Run(ctx, st.ChildRunID); err == nil || !errors.Is(err, domain.ErrNotFound) {
		return err
	}
	cfg, _ := workflow.ParseRunWorkflow(r.Component(st).Config)
	wf, err := h.Workflow(ctx, r.WorkspaceID, cfg.WorkflowID)
	if errors.Is(err, domain.ErrNotFound) {
		return failChildStage(ctx, h, r, st, run.ChildWorkflowGone(st, cfg.WorkflowID))
	}
	if err != nil {
		return err
	}
	if f := run.CheckChild(r, st, wf.ID); f != nil {
		return failChildStage(ctx, h, r, st, f)
	}
	c := run.ChildTrigger{WorkflowID: wf.ID, Definition: wf.Definition}
	for _, comp := range wf.Definition.Components {
		if comp.Module == workflow.ModuleTrigger {
			c.TriggerID = comp.ID
			break
		}
	}
	if c.ConcurrencyKey, err = concurrencyKey(ctx, wf.Definition, r.StageInput(st)); err != nil {
		return failChildStage(ctx, h, r, st, run.ChildKeyFailure(st, err))
	}
	_, err = triggerRun(ctx, h, st.ChildRunID, func(s run.State) ([]domain.Event, error) {
		return run.DecideChildTrigger(s, r, st, c, edgeCondition(ctx), h.now())
	})
	if errors.Is(err, domain.ErrAlreadyExists) {
		return nil
	}
	return wrap("start child run of stage "+st.ID, err)
}

// failChildStage records a RUN_WORKFLOW stage's failure to start its child on the parent.
func failChildStage(ctx context.Context, h *Workflows, r *run.State, st run.Stage, failure []byte) error {
	_, _, err := h.StepRun(ctx, r.ID, []run.Fact{{StageID: st.ID, Kind: run.FactFailed, Error: failure, At: h.now()}})
	return err
}

// RunEnded is what the end of a run moves: the parent run to step with the child's facts (empty
// for a run without parent), and the open child runs a FAILED run cancels, which it cancels.
// A child already finished or never started is left alone. revision is that of the run's
// RunFinished: a state this process holds at or past it (its own step ended the run, as a
// scheduler's does) is the run's end already, and saves a read of the stream per ended run.
func (h *Workflows) RunEnded(ctx context.Context, id string, revision uint64) (parentID string, facts []run.Fact, err error) {
	st, ok := cachedAt(h, RunStream(id), runAgg, revision)
	if !ok {
		if st, err = h.Run(ctx, id); err != nil {
			return "", nil, err
		}
	}
	if st.Status == run.StatusFailed {
		if err := cancelChildren(ctx, h, &st); err != nil {
			return "", nil, err
		}
	}
	return st.ParentRunID, run.ChildFacts(&st), nil
}

// CancelOrphan cancels a child run whose parent has already ended (the parent's cancel found
// no child to cancel because the child started after it); it reports whether it did.
func (h *Workflows) CancelOrphan(ctx context.Context, child *run.State) (bool, error) {
	parent, err := h.Run(ctx, child.ParentRunID)
	if err != nil || !parent.Status.Terminal() || child.Status.Terminal() {
		return false, err
	}
	if parent.Status == run.StatusCompleted {
		return false, nil
	}
	return true, cancelChild(ctx, h, child.ID, parent.ID)
}

func cancelChildren(ctx context.Context, h *Workflows, st *run.State) error {
	for _, child := range st.OpenChildren() {
		if err := cancelChild(ctx, h, child, st.ID); err != nil {
			return err
		}
	}
	return nil
}

func cancelChild(ctx context.Context, h *Workflows, child, parent string) error {
	_, err := h.CancelRun(ctx, child, "its parent run "+parent+" ended")
	if errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrConflict) {
		return nil
	}
	return err
}
