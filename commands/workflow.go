package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
)

var (
	workflowAgg    = aggregate[workflow.State]{evolve: workflow.State.Evolve}
	workflowResAgg = aggregate[workflow.Reservation]{evolve: workflow.Reservation.Evolve}
)

// WorkflowStream is the stream of a workflow.
func WorkflowStream(id string) string { return eventstore.StreamName(workflow.Category, id) }

// workflowNameStream is the reservation stream of a name in a workspace (hashed: names are
// free text).
func workflowNameStream(workspaceID, name string) string {
	sum := sha256.Sum256([]byte(workspaceID + "\n" + workflow.NormalizeName(name)))
	return eventstore.StreamName(workflow.NameCategory, hex.EncodeToString(sum[:]))
}

// prepareDefinition fills a definition's defaults and validates it, its modules against the
// built-ins and the workspace's own.
func (h *Workflows) prepareDefinition(ctx context.Context, workspaceID string, d workflow.Definition) (workflow.Definition, error) {
	d.Normalize(uuid.NewString)
	if err := d.Validate(h.catalog.moduleCheck(ctx, workspaceID)); err != nil {
		return d, err
	}
	if err := d.ValidateConditions(checkCondition); err != nil {
		return d, err
	}
	if err := d.ValidateConcurrency(checkConcurrencyKey); err != nil {
		return d, err
	}
	if err := d.ValidateTransforms(checkTransform); err != nil {
		return d, err
	}
	if err := d.ValidateWaits(checkUntil); err != nil {
		return d, err
	}
	if err := d.ValidateTriggerExpressions(checkPayloadFilter, checkPayloadValue); err != nil {
		return d, err
	}
	return h.sealNotify(d)
}

// checkCondition compiles an edge's condition; the message says what does not compile.
func checkCondition(when string) error {
	_, err := modules.CompileCondition(when)
	var ve *modules.ValidationError
	if errors.As(err, &ve) {
		return errors.New(ve.Message)
	}
	return err
}

// CreateWorkflow is a new workflow of a workspace.
type CreateWorkflow struct {
	WorkspaceID string
	Definition  workflow.Definition
}

// CreateWorkflow validates the definition, reserves its name in the workspace
// (domain.ErrConflict when taken) and creates the workflow.
func (h *Workflows) CreateWorkflow(ctx context.Context, c CreateWorkflow) (workflow.State, error) {
	d, err := h.prepareDefinition(ctx, c.WorkspaceID, c.Definition)
	if err != nil {
		return workflow.State{}, err
	}
	if err := checkChildWorkflows(ctx, h, c.WorkspaceID, d); err != nil {
		return workflow.State{}, err
	}
	id := uuid.NewString()
	if err := h.reserveWorkflowName(ctx, c.WorkspaceID, d.Name, id); err != nil {
		return workflow.State{}, err
	}
	st, _, err := executeFold(ctx, h, WorkflowStream(id), workflowAgg, func(s workflow.State) ([]domain.Event, error) {
		return workflow.DecideCreate(s, id, c.WorkspaceID, d, h.now())
	})
	return st, wrap("create workflow", err)
}

func (h *Workflows) reserveWorkflowName(ctx context.Context, workspaceID, name, workflowID string) error {
	_, err := execute(ctx, h, workflowNameStream(workspaceID, name), workflowResAgg, func(r workflow.Reservation) ([]domain.Event, error) {
		var holder workflow.State
		if r.WorkflowID != "" && r.WorkflowID != workflowID {
			l, err := load(ctx, h, WorkflowStream(r.WorkflowID), workflowAgg)
			if err != nil {
				return nil, err
			}
			holder = l.state
		}
		events, err := workflow.DecideReserve(r, holder, workspaceID, name, workflowID, h.now())
		if errors.Is(err, domain.ErrConflict) {
			return nil, domain.Conflict("a workflow named %q already exists in this workspace", name)
		}
		return events, err
	})
	return err
}

// Workflow folds a live workflow of the workspace; another workspace's, a deleted one or an
// unknown id is domain.ErrNotFound.
func (h *Workflows) Workflow(ctx context.Context, workspaceID, id string) (workflow.State, error) {
	if _, err := uuid.Parse(id); err != nil {
		return workflow.State{}, fmt.Errorf("workflow %q: %w", id, domain.ErrNotFound)
	}
	l, err := load(ctx, h, WorkflowStream(id), workflowAgg)
	if err != nil {
		return workflow.State{}, err
	}
	if !l.state.Live() || l.state.WorkspaceID != workspaceID {
		return workflow.State{}, fmt.Errorf("workflow %s: %w", id, domain.ErrNotFound)
	}
	return l.state, nil
}

// UpdateWorkflow replaces a workflow's definition; a new name is reserved first.
func (h *Workflows) UpdateWorkflow(ctx context.Context, workspaceID, id string, def workflow.Definition) (workflow.State, error) {
	cur, err := h.Workflow(ctx, workspaceID, id)
	if err != nil {
		return workflow.State{}, err
	}
	d, err := h.prepareDefinition(ctx, workspaceID, def)
	if err != nil {
		return workflow.State{}, err
	}
	if err := checkChildWorkflows(ctx, h, workspaceID, d); err != nil {
		return workflow.State{}, err
	}
	if workflow.NormalizeName(d.Name) != workflow.NormalizeName(cur.Definition.Name) {
		if err := h.reserveWorkflowName(ctx, workspaceID, d.Name, id); err != nil {
			return workflow.State{}, err
		}
	}
	return h.changeWorkflow(ctx, workspaceID, id, func(s workflow.State) ([]domain.Event, error) {
		return workflow.DecideUpdate(s, d, h.now())
	})
}

// UpdateComponent applies a partial update to one component (SPEC.md 4.8).
func (h *Workflows) UpdateComponent(ctx context.Context, workspaceID, id, componentID string, p workflow.ComponentPatch) (workflow.State, error) {
	return h.changeWorkflow(ctx, workspaceID, id, func(s workflow.State) ([]domain.Event, error) {
		events, err := workflow.DecideUpdateComponent(s, componentID, p, h.catalog.moduleCheck(ctx, workspaceID), h.now())
		if errors.Is(err, domain.ErrNotFound) {
			return nil, fmt.Errorf("component %q of workflow %s: %w", componentID, id, err)
		}
		if err == nil {
			err = checkChildComponent(ctx, h, s, events)
		}
		if err == nil {
			err = checkComponentExpressions(s, events)
		}
		return events, err
	})
}

// DeleteWorkflow deletes a workflow; its name is free again and runs in flight carry on.
func (h *Workflows) DeleteWorkflow(ctx context.Context, workspaceID, id string) error {
	_, err := h.changeWorkflow(ctx, workspaceID, id, func(s workflow.State) ([]domain.Event, error) {
		return workflow.DecideDelete(s, h.now())
	})
	return err
}

func (h *Workflows) changeWorkflow(ctx context.Context, workspaceID, id string, decide func(workflow.State) ([]domain.Event, error)) (workflow.State, error) {
	if _, err := h.Workflow(ctx, workspaceID, id); err != nil {
		return workflow.State{}, err
	}
	st, _, err := executeFold(ctx, h, WorkflowStream(id), workflowAgg, func(s workflow.State) ([]domain.Event, error) {
		events, err := decide(s)
		if errors.Is(err, workflow.ErrDeleted) {
			return nil, fmt.Errorf("workflow %s: %w", id, domain.ErrNotFound)
		}
		return events, err
	})
	return st, err
}
