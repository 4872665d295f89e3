package commands_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/mcptoken"
)

func TestMintFoldAndRevokeMCPToken(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h, store := newAPIKeyTestHandler(t, func() time.Time { return now })
	ctx := context.Background()
	ws := newAPIKeyTestWorkspace(t, h)
	other := newAPIKeyTestWorkspace(t, h)

	expires := now.Add(time.Hour)
	m, err := h.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws, Label: " desktop ", ExpiresAt: &expires})
	if err != nil {
		t.Fatal(err)
	}
	id, err := mcptoken.ParseID(m.Token)
	if err != nil || id != m.ID || m.WorkspaceID != ws || m.Label != "desktop" || !m.CreatedAt.Equal(now) ||
		m.ExpiresAt == nil || !m.ExpiresAt.Equal(expires) {
		t.Fatalf("minted %+v (id in token %q, %v)", m, id, err)
	}

	// The stream holds the hash, never the token.
	evs, err := store.ReadStream(ctx, commands.MCPTokenStream(m.ID), 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Type != "MCPTokenMinted" {
		t.Fatalf("stream %+v, %v", evs, err)
	}
	if bytes.Contains(evs[0].Data, []byte(m.Token)) || bytes.Contains(evs[0].Data, []byte(m.Token[len(m.Token)-64:])) ||
		!bytes.Contains(evs[0].Data, []byte(mcptoken.Hash(m.Token))) {
		t.Fatalf("minted event %s must carry the token's hash only", evs[0].Data)
	}

	st, err := h.Workspaces.MCPToken(ctx, m.ID)
	if err != nil || !st.Usable(now) || st.WorkspaceID != ws || st.Hash != mcptoken.Hash(m.Token) {
		t.Fatalf("folded %+v, %v", st, err)
	}
	if st.Usable(expires) {
		t.Fatal("a token must be unusable at its expiry")
	}

	// Another workspace cannot revoke it, and learns nothing: the answer is not found.
	if err := h.Workspaces.RevokeMCPToken(ctx, other, m.ID, ""); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("revoke from another workspace: %v, want ErrNotFound", err)
	}
	if err := h.Workspaces.RevokeMCPToken(ctx, ws, m.ID, "rotated"); err != nil {
		t.Fatal(err)
	}
	if err := h.Workspaces.RevokeMCPToken(ctx, ws, m.ID, "again"); err != nil {
		t.Fatalf("a second revocation must succeed quietly: %v", err)
	}
	st, err = h.Workspaces.MCPToken(ctx, m.ID)
	if err != nil || st.Usable(now) || !st.Revoked || st.RevokedAt == nil {
		t.Fatalf("after revoke %+v, %v", st, err)
	}
	if evs, _ := store.ReadStream(ctx, commands.MCPTokenStream(m.ID), 0, 10); len(evs) != 2 {
		t.Fatalf("%d events after two revocations, want 2", len(evs))
	}

	for _, bad := range []string{"not-a-uuid", "00000000-0000-4000-8000-000000000000"} {
		if _, err := h.Workspaces.MCPToken(ctx, bad); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("MCPToken(%q) = %v, want ErrNotFound", bad, err)
		}
		if err := h.Workspaces.RevokeMCPToken(ctx, ws, bad, ""); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("RevokeMCPToken(%q) = %v, want ErrNotFound", bad, err)
		}
	}
	if _, err := h.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: "no-such-workspace"}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("mint for an unknown workspace: %v, want ErrNotFound", err)
	}
	past := now.Add(-time.Second)
	if _, err := h.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws, ExpiresAt: &past}); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("mint with a past expiry: %v, want ErrInvalid", err)
	}
	// Two mints never share a token.
	m2, err := h.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: ws})
	if err != nil || m2.Token == m.Token || m2.ID == m.ID || m2.ExpiresAt != nil {
		t.Fatalf("second mint %+v, %v", m2, err)
	}
}
