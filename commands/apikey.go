package commands

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/apikey"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/apikeys"
)

var apiKeyAgg = aggregate[apikey.State]{evolve: apikey.State.Evolve}

// APIKeyStream is the stream of an API key.
func APIKeyStream(id string) string { return eventstore.StreamName(apikey.Category, id) }

// CreateAPIKey is the input of the create-API-key command.
type CreateAPIKey struct {
	WorkspaceID        string
	Label              string
	AllowedWorkflowIDs []string
	ExpiresAt          *time.Time
}

// APIKeyMinted is a new key as SPEC.md 2.10 returns it. APISecret is in no event and cannot be
// recovered: this value is the only place it ever exists.
type APIKeyMinted struct {
	ID                 string     `json:"id"`
	APIKey             string     `json:"apiKey"`
	APISecret          string     `json:"apiSecret"`
	Label              string     `json:"label"`
	AllowedWorkflowIDs []string   `json:"allowedWorkflowIds"`
	ExpiresAt          *time.Time `json:"expiresAt"`
	CreatedAt          time.Time  `json:"createdAt"`
}

// CreateAPIKey mints a key for an existing workspace, scoped to workflows of that workspace
// when any are named. Only the key's hash and public key are recorded; the minted value
// carries the apiKey and apiSecret for the caller to keep.
func (h *Workspaces) CreateAPIKey(ctx context.Context, c CreateAPIKey) (APIKeyMinted, error) {
	if _, err := h.Workspace(ctx, c.WorkspaceID); err != nil {
		return APIKeyMinted{}, err
	}
	if err := h.checkAllowedWorkflows(ctx, c.WorkspaceID, c.AllowedWorkflowIDs); err != nil {
		return APIKeyMinted{}, err
	}
	id := uuid.New()
	m, err := apikeys.Mint(id, nil)
	if err != nil {
		return APIKeyMinted{}, err
	}
	var ev apikey.Created
	_, err = execute(ctx, h, APIKeyStream(m.ID), apiKeyAgg, func(s apikey.State) ([]domain.Event, error) {
		evs, err := apikey.DecideCreate(s, apikey.Create{ID: m.ID, WorkspaceID: c.WorkspaceID, KeyHash: m.KeyHash,
			PublicKey: m.PublicKey, Label: c.Label, AllowedWorkflowIDs: c.AllowedWorkflowIDs, ExpiresAt: c.ExpiresAt}, h.now())
		if err == nil {
			ev = evs[0].(apikey.Created)
		}
		return evs, err
	})
	if err != nil {
		return APIKeyMinted{}, wrap("create api key", err)
	}
	return APIKeyMinted{ID: m.ID, APIKey: m.APIKey, APISecret: m.APISecret, Label: ev.Label,
		AllowedWorkflowIDs: ev.AllowedWorkflowIDs, ExpiresAt: ev.ExpiresAt, CreatedAt: ev.At}, nil
}

// maxUnknownShown bounds the ids a refusal lists; the rest are counted.
const maxUnknownShown = 5

// checkAllowedWorkflows refuses a scope naming anything but live workflows of the workspace:
// such a key could call nothing (SPEC.md 5 rule 2 scopes it to the listed ids only), so it is
// a mistake to say at once, naming the ids, rather than a key found useless later.
func (h *Workspaces) checkAllowedWorkflows(ctx context.Context, workspaceID string, ids []string) error {
	ids, err := apikey.NormalizeAllowed(ids)
	if err != nil {
		return err
	}
	var unknown []string
	for _, id := range ids {
		_, err := h.workflows.Workflow(ctx, workspaceID, id)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			unknown = append(unknown, id)
		case err != nil:
			return wrap("check allowed workflows", err)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	shown := make([]string, 0, maxUnknownShown)
	for _, id := range unknown[:min(len(unknown), maxUnknownShown)] {
		shown = append(shown, strconv.Quote(id))
	}
	more := ""
	if n := len(unknown) - len(shown); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return domain.Invalid("allowedWorkflowIds", "names no workflow of this workspace: %s%s", strings.Join(shown, ", "), more)
}

// RevokeAPIKey revokes a key; revoking it again succeeds without a new event.
func (h *Workspaces) RevokeAPIKey(ctx context.Context, id string) error {
	return h.RevokeAPIKeyWithReason(ctx, id, "")
}

// RevokeAPIKeyWithReason revokes a key and records why.
func (h *Workspaces) RevokeAPIKeyWithReason(ctx context.Context, id, reason string) error {
	id, err := canonicalKeyID(id)
	if err != nil {
		return err
	}
	_, err = execute(ctx, h, APIKeyStream(id), apiKeyAgg, func(s apikey.State) ([]domain.Event, error) {
		return apikey.DecideRevoke(s, reason, h.now())
	})
	return wrap("revoke api key "+id, err)
}

// APIKey folds the key with id from the event store, so a key is visible the instant its
// creation was acknowledged; an unknown id is domain.ErrNotFound.
func (h *Workspaces) APIKey(ctx context.Context, id string) (apikey.State, error) {
	id, err := canonicalKeyID(id)
	if err != nil {
		return apikey.State{}, err
	}
	k, err := load(ctx, h, APIKeyStream(id), apiKeyAgg)
	if err != nil {
		return apikey.State{}, err
	}
	if !k.state.Exists {
		return apikey.State{}, fmt.Errorf("api key %s: %w", id, domain.ErrNotFound)
	}
	return k.state, nil
}

// canonicalKeyID writes a key id the one way its stream is named. Input that is no UUID at all
// is answered as an unknown key rather than used to name a stream.
func canonicalKeyID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("api key %q: %w", id, domain.ErrNotFound)
	}
	return u.String(), nil
}
