package commands

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/domain/authorization"
	"github.com/switchyard/switchyard/eventstore"
)

var appAgg = aggregate[app.State]{evolve: app.State.Evolve}

// AppStream is the stream of an OAuth app.
func AppStream(clientID string) string { return eventstore.StreamName(app.Category, clientID) }

// RegisterApp is the input of the register-app command.
type RegisterApp struct {
	OwnerUserID string
	Public      bool
	Metadata    app.Metadata
}

// RegisterApp records a draft app owned by an existing user and returns its client id.
func (h *Apps) RegisterApp(ctx context.Context, c RegisterApp) (string, error) {
	if _, err := h.users.User(ctx, c.OwnerUserID); err != nil {
		return "", fmt.Errorf("app owner: %w", err)
	}
	id := uuid.NewString()
	_, err := execute(ctx, h, AppStream(id), appAgg, func(s app.State) ([]domain.Event, error) {
		return app.DecideRegister(s, app.Register{ClientID: id, OwnerUserID: c.OwnerUserID, Public: c.Public, Metadata: c.Metadata}, h.now())
	})
	return id, wrap("register app", err)
}

// UpdateApp replaces the metadata of a draft or a submitted app (which goes back to draft: the
// edit needs its own review); an approved app answers a conflict (409).
func (h *Apps) UpdateApp(ctx context.Context, clientID string, m app.Metadata) error {
	return h.onApp(ctx, "update app", clientID, func(s app.State) ([]domain.Event, error) { return app.DecideUpdate(s, m, h.now()) })
}

// SubmitApp puts the app in the review queue.
func (h *Apps) SubmitApp(ctx context.Context, clientID string) error {
	return h.onApp(ctx, "submit app", clientID, func(s app.State) ([]domain.Event, error) { return app.DecideSubmit(s, h.now()) })
}

// ApproveApp makes revision of a submitted app live (staff only: the caller checks). revision
// is the one the reviewer saw; app.ErrRevisionChanged when the app changed since.
func (h *Apps) ApproveApp(ctx context.Context, clientID, reviewerID string, revision int) error {
	return h.onApp(ctx, "approve app", clientID, func(s app.State) ([]domain.Event, error) {
		return app.DecideApprove(s, reviewerID, revision, h.now())
	})
}

// RevertApp sends the app back to draft and invalidates its client secret (staff only: the
// caller checks). Tokens already issued to the app stop working with the app: the token
// endpoint and bearer checks require a live app.
func (h *Apps) RevertApp(ctx context.Context, clientID, reviewerID, reason string) error {
	return h.onApp(ctx, "revert app", clientID, func(s app.State) ([]domain.Event, error) {
		return app.DecideRevert(s, reviewerID, reason, h.now())
	})
}

// IssueAppSecret issues a new client secret, replacing any earlier one, and returns it. Only its
// hash is recorded: this return value is the one place the secret exists.
func (h *Apps) IssueAppSecret(ctx context.Context, clientID string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("client secret: %w", err)
	}
	secret := "sys_" + base64.RawURLEncoding.EncodeToString(b)
	err := h.onApp(ctx, "issue client secret", clientID, func(s app.State) ([]domain.Event, error) {
		return app.DecideIssueSecret(s, authorization.HashToken(secret), h.now())
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// App folds the app with clientID from the event store; unknown is domain.ErrNotFound.
func (h *Apps) App(ctx context.Context, clientID string) (app.State, error) {
	id, err := canonicalID("app", clientID)
	if err != nil {
		return app.State{}, err
	}
	a, err := load(ctx, h, AppStream(id), appAgg)
	if err != nil {
		return app.State{}, err
	}
	if !a.state.Exists {
		return app.State{}, fmt.Errorf("app %s: %w", id, domain.ErrNotFound)
	}
	return a.state, nil
}

func (h *Apps) onApp(ctx context.Context, op, clientID string, decide func(app.State) ([]domain.Event, error)) error {
	id, err := canonicalID("app", clientID)
	if err != nil {
		return err
	}
	_, err = execute(ctx, h, AppStream(id), appAgg, decide)
	return wrap(op+" "+id, err)
}

// canonicalID writes a UUID the one way streams are named; anything else is an unknown subject.
func canonicalID(what, id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", what, id, domain.ErrNotFound)
	}
	return u.String(), nil
}
