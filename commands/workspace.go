package commands

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/eventstore"
)

var workspaceAgg = aggregate[workspace.State]{evolve: workspace.State.Evolve}

// WorkspaceStream is the stream of a workspace.
func WorkspaceStream(id string) string { return eventstore.StreamName(workspace.Category, id) }

// CreateWorkspace creates a workspace owned by the user with ownerEmail and returns its id.
func (h *Workspaces) CreateWorkspace(ctx context.Context, name, ownerEmail string) (string, error) {
	if err := workspace.ValidateName(name); err != nil {
		return "", err
	}
	owner, err := h.users.UserByEmail(ctx, ownerEmail)
	if err != nil {
		return "", fmt.Errorf("workspace owner: %w", err)
	}
	id := uuid.NewString()
	_, err = execute(ctx, h, WorkspaceStream(id), workspaceAgg, func(s workspace.State) ([]domain.Event, error) {
		return workspace.DecideCreate(s, workspace.Create{WorkspaceID: id, Name: name, OwnerUserID: owner.ID}, h.now())
	})
	return id, wrap("create workspace", err)
}

// AddMember gives the user with email a role in the workspace.
func (h *Workspaces) AddMember(ctx context.Context, workspaceID, email, role string) error {
	u, err := h.users.UserByEmail(ctx, email)
	if err != nil {
		return fmt.Errorf("member: %w", err)
	}
	_, err = execute(ctx, h, WorkspaceStream(workspaceID), workspaceAgg, func(s workspace.State) ([]domain.Event, error) {
		return workspace.DecideAddMember(s, u.ID, role, h.now())
	})
	return wrap("add member", err)
}

// Workspace returns the workspace with id, folded from the event store.
func (h *Workspaces) Workspace(ctx context.Context, id string) (workspace.State, error) {
	w, err := load(ctx, h, WorkspaceStream(id), workspaceAgg)
	if err != nil {
		return workspace.State{}, err
	}
	if !w.state.Exists {
		return workspace.State{}, fmt.Errorf("workspace %s: %w", id, domain.ErrNotFound)
	}
	return w.state, nil
}
