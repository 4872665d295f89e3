package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/eventstore"
)

// workspaceFlagHelp is the help of every --workspace that names an existing workspace.
const workspaceFlagHelp = "workspace id, or its name when no other workspace has it (required)"

// withWorkspace is withApp for a command naming a workspace: *ref, an id or a name, is replaced
// by the workspace's id before fn runs.
func withWorkspace(ctx context.Context, ref *string, fn func(*app) error) error {
	return withApp(ctx, func(a *app) error {
		id, err := resolveWorkspace(ctx, a, *ref)
		if err != nil {
			return err
		}
		*ref = id
		return fn(a)
	})
}

// resolveWorkspace returns ref when it is an id (a UUID), else the id of the one workspace named
// ref. Names are not unique: several workspaces of one name are an error listing them, so the
// operator picks by id. The names come from the event log, not the read model, which serve may
// not have brought up to date (bootstrap and then a command, with no serve in between).
func resolveWorkspace(ctx context.Context, a *app, ref string) (string, error) {
	if _, err := uuid.Parse(ref); err == nil || ref == "" {
		return ref, nil
	}
	named, err := workspacesNamed(ctx, a.store, ref)
	if err != nil {
		return "", err
	}
	switch len(named) {
	case 0:
		return "", fmt.Errorf("--workspace %q: no workspace has this id or name: %w", ref, domain.ErrNotFound)
	case 1:
		return named[0].WorkspaceID, nil
	}
	lines := make([]string, len(named))
	for i, w := range named {
		owner := "user " + w.OwnerUserID
		if u, err := a.cmds.Identity.User(ctx, w.OwnerUserID); err == nil {
			owner = u.Email
		}
		lines[i] = fmt.Sprintf("  %s  created %s by %s", w.WorkspaceID, w.At.UTC().Format(time.RFC3339), owner)
	}
	return "", fmt.Errorf("--workspace %q: %d workspaces have this name; pass the id of one:\n%s", ref, len(named), strings.Join(lines, "\n"))
}

// workspacesNamed reads every workspace creation of the log and keeps those named name, oldest
// first.
func workspacesNamed(ctx context.Context, store eventstore.Store, name string) ([]workspace.Created, error) {
	const batch = 1000
	filter := eventstore.Filter{Types: []string{workspace.Created{}.EventType()}}
	var named []workspace.Created
	for from := eventstore.Start; ; {
		evs, err := store.ReadAll(ctx, from, batch, filter)
		if err != nil {
			return nil, fmt.Errorf("look up workspace %q: %w", name, err)
		}
		for _, rec := range evs {
			ev, err := domain.Events.Decode(rec.Type, rec.Data)
			if err != nil {
				return nil, fmt.Errorf("look up workspace %q: %w", name, err)
			}
			if c, ok := ev.(workspace.Created); ok && c.Name == name {
				named = append(named, c)
			}
		}
		if len(evs) < batch {
			return named, nil
		}
		from = evs[len(evs)-1].Position
	}
}
