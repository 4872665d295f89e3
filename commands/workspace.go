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

// AddMember gives the user with email a role in the workspace; a member already is
// workspace.ErrAlreadyMember (their role changes through ChangeMemberRole).
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

// MemberChange names a member of a workspace (by user id, or by email when UserID is empty)
// and who changes them: a member (By, their user id) or the operator at the command line
// (Operator).
type MemberChange struct {
	WorkspaceID string
	UserID      string
	Email       string
	// Role is the new role (ChangeMemberRole only).
	Role     string
	By       string
	Operator bool
}

func (c MemberChange) actor() workspace.Actor { return workspace.Actor{By: c.By, Operator: c.Operator} }

// memberID is the user id the change names.
func (h *Workspaces) memberID(ctx context.Context, c MemberChange) (string, error) {
	if c.UserID != "" {
		return c.UserID, nil
	}
	if c.Email == "" {
		return "", domain.Invalid("member", "is required (a user id or an email)")
	}
	u, err := h.users.UserByEmail(ctx, c.Email)
	if err != nil {
		return "", fmt.Errorf("member: %w", err)
	}
	return u.ID, nil
}

// ChangeMemberRole gives a member another role under workspace.DecideChangeRole's rules.
func (h *Workspaces) ChangeMemberRole(ctx context.Context, c MemberChange) error {
	id, err := h.memberID(ctx, c)
	if err != nil {
		return err
	}
	_, err = execute(ctx, h, WorkspaceStream(c.WorkspaceID), workspaceAgg, func(s workspace.State) ([]domain.Event, error) {
		return workspace.DecideChangeRole(s, workspace.ChangeRole{Actor: c.actor(), UserID: id, Role: c.Role}, h.now())
	})
	return wrap("change member role", err)
}

// RemoveMember takes a member out of the workspace under workspace.DecideRemoveMember's rules.
func (h *Workspaces) RemoveMember(ctx context.Context, c MemberChange) error {
	id, err := h.memberID(ctx, c)
	if err != nil {
		return err
	}
	_, err = execute(ctx, h, WorkspaceStream(c.WorkspaceID), workspaceAgg, func(s workspace.State) ([]domain.Event, error) {
		return workspace.DecideRemoveMember(s, workspace.RemoveMember{Actor: c.actor(), UserID: id}, h.now())
	})
	return wrap("remove member", err)
}

// Workspace returns the workspace with id, folded from the event store. An id that is not a
// UUID names no workspace: domain.ErrNotFound, as for any unknown id, before it reaches the
// store (which refuses NUL and invalid UTF-8 in a stream name).
func (h *Workspaces) Workspace(ctx context.Context, id string) (workspace.State, error) {
	if _, err := uuid.Parse(id); err != nil {
		return workspace.State{}, fmt.Errorf("workspace %q: %w", id, domain.ErrNotFound)
	}
	w, err := load(ctx, h, WorkspaceStream(id), workspaceAgg)
	if err != nil {
		return workspace.State{}, err
	}
	if !w.state.Exists {
		return workspace.State{}, fmt.Errorf("workspace %s: %w", id, domain.ErrNotFound)
	}
	return w.state, nil
}
