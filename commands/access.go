package commands

import (
	"context"
	"errors"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/workspace"
)

// Access checks that c may act in the workspace with the required scope ("" for membership
// alone), by the rules of domain/access. Every surface that acts for a person or a token on a
// workspace calls it. The workspace is folded from the event store for sessions and tokens
// alike: a role granted, changed or taken a moment ago already counts, and a token never acts
// with more than its user's current role holds.
func (h *Workspaces) Access(ctx context.Context, workspaceID string, c access.Caller, required string) (access.Rights, error) {
	if !c.Session && c.WorkspaceID != workspaceID {
		// Refused without a load: a token acts only on its own workspace.
		return access.Check(workspace.State{ID: workspaceID}, c, required)
	}
	ws, err := h.Workspace(ctx, workspaceID)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return access.Rights{}, wrap("check access", err)
	}
	if err != nil {
		ws = workspace.State{ID: workspaceID}
	}
	return access.Check(ws, c, required)
}
