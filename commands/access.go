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
// workspace calls it. A session's workspace is folded from the event store, so a role granted
// a moment ago already counts; a token's is not loaded at all.
func (h *Workspaces) Access(ctx context.Context, workspaceID string, c access.Caller, required string) (access.Grant, error) {
	ws := workspace.State{ID: workspaceID}
	if c.Session {
		var err error
		ws, err = h.Workspace(ctx, workspaceID)
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			return access.Grant{}, wrap("check access", err)
		}
	}
	return access.Check(ws, c, required)
}
