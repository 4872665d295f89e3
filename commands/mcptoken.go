package commands

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/mcptoken"
	"github.com/switchyard/switchyard/eventstore"
)

var mcpTokenAgg = aggregate[mcptoken.State]{evolve: mcptoken.State.Evolve}

// MCPTokenStream is the stream of an MCP token.
func MCPTokenStream(id string) string { return eventstore.StreamName(mcptoken.Category, id) }

// MintMCPToken is the input of the mint-MCP-token command.
type MintMCPToken struct {
	WorkspaceID string
	Label       string
	ExpiresAt   *time.Time
}

// MintedMCPToken is a new token as the mint endpoint returns it. Token is in no event and
// cannot be recovered: this value is the only place it ever exists.
type MintedMCPToken struct {
	ID          string     `json:"id"`
	Token       string     `json:"token"`
	WorkspaceID string     `json:"workspaceId"`
	Label       string     `json:"label"`
	ExpiresAt   *time.Time `json:"expiresAt"`
	CreatedAt   time.Time  `json:"createdAt"`
}

// MintMCPToken mints a token for an existing workspace. Only the token's SHA-256 is recorded.
func (h *Workspaces) MintMCPToken(ctx context.Context, c MintMCPToken) (MintedMCPToken, error) {
	if _, err := h.Workspace(ctx, c.WorkspaceID); err != nil {
		return MintedMCPToken{}, err
	}
	id := uuid.New()
	random := make([]byte, mcptoken.RandomBytes)
	if _, err := io.ReadFull(rand.Reader, random); err != nil {
		return MintedMCPToken{}, fmt.Errorf("mint mcp token: %w", err)
	}
	token := mcptoken.Format(id, random)
	var ev mcptoken.Minted
	_, err := execute(ctx, h, MCPTokenStream(id.String()), mcpTokenAgg, func(s mcptoken.State) ([]domain.Event, error) {
		evs, err := mcptoken.DecideMint(s, mcptoken.Mint{ID: id.String(), WorkspaceID: c.WorkspaceID, Label: c.Label,
			Hash: mcptoken.Hash(token), ExpiresAt: c.ExpiresAt}, h.now())
		if err == nil {
			ev = evs[0].(mcptoken.Minted)
		}
		return evs, err
	})
	if err != nil {
		return MintedMCPToken{}, wrap("mint mcp token", err)
	}
	return MintedMCPToken{ID: ev.ID, Token: token, WorkspaceID: ev.WorkspaceID, Label: ev.Label,
		ExpiresAt: ev.ExpiresAt, CreatedAt: ev.CreatedAt}, nil
}

// RevokeMCPToken revokes a token of workspaceID; a token of another workspace is
// domain.ErrNotFound. Revoking it again succeeds without a new event.
func (h *Workspaces) RevokeMCPToken(ctx context.Context, workspaceID, id, reason string) error {
	id, err := canonicalMCPTokenID(id)
	if err != nil {
		return err
	}
	_, err = execute(ctx, h, MCPTokenStream(id), mcpTokenAgg, func(s mcptoken.State) ([]domain.Event, error) {
		return mcptoken.DecideRevoke(s, workspaceID, reason, h.now())
	})
	return wrap("revoke mcp token "+id, err)
}

// MCPToken folds the token with id from the event store, so a token works the instant its
// minting was acknowledged and fails the instant its revocation was; an unknown id is
// domain.ErrNotFound.
func (h *Workspaces) MCPToken(ctx context.Context, id string) (mcptoken.State, error) {
	id, err := canonicalMCPTokenID(id)
	if err != nil {
		return mcptoken.State{}, err
	}
	t, err := load(ctx, h, MCPTokenStream(id), mcpTokenAgg)
	if err != nil {
		return mcptoken.State{}, err
	}
	if !t.state.Exists {
		return mcptoken.State{}, fmt.Errorf("mcp token %s: %w", id, domain.ErrNotFound)
	}
	return t.state, nil
}

// canonicalMCPTokenID writes a token id the one way its stream is named; input that is no UUID
// is answered as an unknown token rather than used to name a stream.
func canonicalMCPTokenID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("mcp token %q: %w", id, domain.ErrNotFound)
	}
	return u.String(), nil
}
