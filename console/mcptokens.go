package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/projections"
)

type mcpData struct {
	List   []projections.MCPTokenRow
	Pager  pager
	Minted *commands.MintedMCPToken
	Label  string
}

// mcpTokens lists, mints (the token shown once) and revokes the workspace's MCP tokens; the
// page is for owners and admins, as the /v1 endpoints are.
func (c *Console) mcpTokens(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	var d mcpData
	notice, errText, status := "", "", http.StatusOK
	if q.r.Method == http.MethodPost {
		var err error
		switch q.r.PostForm.Get("action") {
		case "mint":
			d.Label = strings.TrimSpace(q.r.PostForm.Get("label"))
			var m commands.MintedMCPToken
			if m, err = c.mintMCP(q, d.Label, q.r.PostForm.Get("expires")); err == nil {
				d.Minted, d.Label = &m, ""
				notice = "Token created. Copy it now: it is not shown again."
			}
		case "revoke":
			if err = c.cmds.Workspaces.RevokeMCPToken(q.acting(), q.ws.ID, q.r.PostForm.Get("token_id"), "revoked from the console by "+q.user.Email); err == nil {
				notice = "Token revoked: MCP calls with it are refused from now on."
			}
		default:
			err = domain.Invalid("action", "must be mint or revoke")
		}
		if err != nil {
			status, _, errText = words(err, q.ws.Role)
		}
	}
	list, total, err := c.q.MCPTokensOf(q.ctx(), q.ws.ID, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	if m := d.Minted; m != nil && !slices.ContainsFunc(list, func(r projections.MCPTokenRow) bool { return r.ID == m.ID }) {
		// The read model has not caught up with the mint yet: show the token from its answer.
		list, total = append([]projections.MCPTokenRow{{ID: m.ID, WorkspaceID: m.WorkspaceID, Label: m.Label, ExpiresAt: m.ExpiresAt,
			CreatedAt: m.CreatedAt}}, list...), total+1
	}
	d.List, d.Pager = list, newPager(q, p, total)
	if d.Minted != nil {
		q.w.Header().Set("Cache-Control", "no-store")
	}
	c.renderView(q, status, "mcp", "MCP tokens", d, notice, errText)
}

func (c *Console) mintMCP(q *request, label, expires string) (commands.MintedMCPToken, error) {
	cmd := commands.MintMCPToken{WorkspaceID: q.ws.ID, Label: label}
	var err error
	if cmd.ExpiresAt, err = parseExpiry(expires, c.now()); err != nil {
		return commands.MintedMCPToken{}, err
	}
	return c.cmds.Workspaces.MintMCPToken(q.acting(), cmd)
}
