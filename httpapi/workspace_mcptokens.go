package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/projections"
)

// mountMCPTokens adds the workspace's MCP token endpoints (docs/mcp.md). Minting a token hands
// out the power to run billed work, so every one of them needs workspace:admin.
func (s *Workspaces) mountMCPTokens(r *mux.Router) {
	r.Handle("/mcp-tokens", s.with(access.ScopeWorkspaceAdmin, s.mintMCPToken)).Methods(http.MethodPost)
	r.Handle("/mcp-tokens", s.with(access.ScopeWorkspaceAdmin, s.listMCPTokens)).Methods(http.MethodGet)
	r.Handle("/mcp-tokens/{tokenId}", s.with(access.ScopeWorkspaceAdmin, s.revokeMCPToken)).Methods(http.MethodDelete)
}

func (s *Workspaces) mintMCPToken(w http.ResponseWriter, r *http.Request, ws string) {
	var body struct {
		Label     string     `json:"label"`
		ExpiresAt *time.Time `json:"expiresAt"`
	}
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	m, err := s.Cmds.Workspaces.MintMCPToken(withActor(r), commands.MintMCPToken{WorkspaceID: ws, Label: body.Label, ExpiresAt: body.ExpiresAt})
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	// The token is shown this once: no cache may keep a copy.
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusCreated, m)
}

func (s *Workspaces) listMCPTokens(w http.ResponseWriter, r *http.Request, ws string) {
	ServePage(w, r, func(ctx context.Context, p projections.Page) ([]projections.MCPTokenRow, int, error) {
		return s.Queries.MCPTokensOf(ctx, ws, p)
	})
}

func (s *Workspaces) revokeMCPToken(w http.ResponseWriter, r *http.Request, ws string) {
	id := mux.Vars(r)["tokenId"]
	err := s.Cmds.Workspaces.RevokeMCPToken(withActor(r), ws, id, "")
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "MCP token "+id+" not found")
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
