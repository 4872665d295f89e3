package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/mcptoken"
	"github.com/switchyard/switchyard/projections"
)

type mcpData struct {
	List   []mcpRow
	Pager  pager
	Minted *commands.MintedMCPToken
	Label  string
	// Revoking is the token whose revocation waits for a confirmation.
	Revoking *projections.MCPTokenRow
}

// mcpRow is a token of the list with its state in words.
type mcpRow struct {
	projections.MCPTokenRow
	// State is active, expired or revoked.
	State string
}

// mintedTokens holds a new MCP token, sealed, from the create's redirect to the page that
// shows it once.
var mintedTokens = oneTimeView[commands.MintedMCPToken]{cookie: "sy_minted_mcp", page: "/mcp-tokens", purpose: "console-minted-mcp-token", ttl: 5 * time.Minute}

// mcpTokens lists, mints (post, redirect, then the token shown once) and revokes (after a
// confirmation) the workspace's MCP tokens; the page is for owners and admins, as the /v1
// endpoints are.
func (c *Console) mcpTokens(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	var d mcpData
	notice, errText, status := "", "", http.StatusOK
	if q.r.Method == http.MethodPost {
		var err error
		if d.Label, err = c.mcpAction(q); err == nil {
			return // redirected
		}
		status, _, errText = words(err, q.ws.Role)
	}
	query := q.r.URL.Query()
	created, revoked := query.Get("created"), query.Get("revoked")
	switch {
	case created != "":
		if d.Minted = mintedTokens.take(c, q, created); d.Minted != nil {
			notice = "Token created. Copy it now: it is not shown again."
		} else {
			notice = "The token was shown once and is not shown again. If it was not copied, revoke it and create another."
		}
	case revoked != "":
		notice = "Token revoked: MCP calls with it are refused from now on."
	}
	list, total, err := c.q.MCPTokensOf(q.ctx(), q.ws.ID, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	d.List = c.mcpRows(q, list, created, revoked)
	d.Pager = newPager(q, p, total+len(d.List)-len(list))
	if id := query.Get("revoke"); id != "" && q.r.Method == http.MethodGet {
		if d.Revoking, err = c.revokableMCP(q, id); err != nil {
			c.fail(q, err)
			return
		}
	}
	c.renderView(q, status, "mcp", "MCP tokens", d, notice, errText)
}

// mcpAction runs the form's mint or revoke and redirects to the page that shows the result, so
// reloading it repeats nothing. On failure it returns the label to show again.
func (c *Console) mcpAction(q *request) (string, error) {
	switch q.r.PostForm.Get("action") {
	case "mint":
		label := strings.TrimSpace(q.r.PostForm.Get("label"))
		m, err := c.mintMCP(q, label, q.r.PostForm.Get("expires"))
		if err == nil {
			err = mintedTokens.hold(c, q, m.ID, m)
		}
		if err != nil {
			return label, err
		}
		redirectTo(q, mintedTokens.page, url.Values{"created": {m.ID}})
		return "", nil
	case "revoke":
		id := q.r.PostForm.Get("token_id")
		if err := c.cmds.Workspaces.RevokeMCPToken(q.acting(), q.ws.ID, id, "revoked from the console by "+q.user.Email); err != nil {
			return "", err
		}
		redirectTo(q, mintedTokens.page, url.Values{"revoked": {id}})
		return "", nil
	}
	return "", domain.Invalid("action", "must be mint or revoke")
}

// mcpRows is the page of tokens with the token just minted or revoked as its stream has it.
func (c *Console) mcpRows(q *request, list []projections.MCPTokenRow, created, revoked string) []mcpRow {
	rows := make([]mcpRow, len(list))
	for i, t := range list {
		rows[i] = mcpRow{MCPTokenRow: t}
	}
	rows = withFresh(rows, created, revoked, func(id string) (mcpRow, error) {
		t, err := c.mcpToken(q, id)
		return mcpRow{MCPTokenRow: t}, err
	})
	now := c.now()
	for i, t := range rows {
		rows[i].State = credentialState(t.RevokedAt, t.ExpiresAt, now)
	}
	return rows
}

func (r mcpRow) rowID() string { return r.ID }

func (r mcpRow) revokedAs(fresh mcpRow) mcpRow {
	r.RevokedAt = fresh.RevokedAt
	return r
}

// revokableMCP is the token id to confirm the revocation of; nil when it works no more.
func (c *Console) revokableMCP(q *request, id string) (*projections.MCPTokenRow, error) {
	row, err := c.mcpToken(q, id)
	if err != nil {
		return nil, err
	}
	if credentialState(row.RevokedAt, row.ExpiresAt, c.now()) != "active" {
		return nil, nil // nothing to confirm
	}
	return &row, nil
}

// mcpToken reads token id of this workspace from its stream; another workspace's token is not
// found.
func (c *Console) mcpToken(q *request, id string) (projections.MCPTokenRow, error) {
	t, err := c.cmds.Workspaces.MCPToken(q.ctx(), id)
	if err == nil && t.WorkspaceID != q.ws.ID {
		err = domain.ErrNotFound
	}
	if err != nil {
		return projections.MCPTokenRow{}, err
	}
	return mcpFromState(t), nil
}

func mcpFromState(t mcptoken.State) projections.MCPTokenRow {
	return projections.MCPTokenRow{ID: t.ID, WorkspaceID: t.WorkspaceID, Label: t.Label, ExpiresAt: t.ExpiresAt,
		RevokedAt: t.RevokedAt, CreatedAt: t.CreatedAt}
}

func (c *Console) mintMCP(q *request, label, expires string) (commands.MintedMCPToken, error) {
	cmd := commands.MintMCPToken{WorkspaceID: q.ws.ID, Label: label}
	var err error
	if cmd.ExpiresAt, err = parseExpiry(expires, c.now()); err != nil {
		return commands.MintedMCPToken{}, err
	}
	return c.cmds.Workspaces.MintMCPToken(q.acting(), cmd)
}
