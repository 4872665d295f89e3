package console

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/projections"
)

type keysData struct {
	List      []projections.APIKeyRow
	Pager     pager
	Workflows []projections.WorkflowListItem
	// Minted is the key just created: its secret is shown this once.
	Minted *commands.APIKeyMinted
	Form   keyForm
}

type keyForm struct {
	Label     string
	Workflows []string
	Expires   string
}

// apiKeys lists the workspace's API keys; owners and admins create (the secret shown once)
// and revoke them.
func (c *Console) apiKeys(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	var d keysData
	notice, errText, status := "", "", http.StatusOK
	if q.r.Method == http.MethodPost {
		if !c.requireManage(q) {
			return
		}
		var err error
		switch q.r.PostForm.Get("action") {
		case "create":
			d.Form = keyForm{Label: q.r.PostForm.Get("label"), Workflows: q.r.PostForm["workflows"], Expires: q.r.PostForm.Get("expires")}
			var m commands.APIKeyMinted
			if m, err = c.createKey(q, d.Form); err == nil {
				d.Minted, d.Form = &m, keyForm{}
				notice = "Key created. Copy the secret now: it is not shown again."
			}
		case "revoke":
			if err = c.revokeKey(q, q.r.PostForm.Get("key_id")); err == nil {
				notice = "Key revoked: requests signed with it are refused from now on."
			}
		default:
			err = domain.Invalid("action", "must be create or revoke")
		}
		if err != nil {
			status, _, errText = words(err, q.ws.Role)
		}
	}
	list, total, err := c.q.APIKeysOf(q.ctx(), q.ws.ID, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	if d.Minted != nil && !slices.ContainsFunc(list, func(k projections.APIKeyRow) bool { return k.ID == d.Minted.ID }) {
		// The read model has not caught up with the create yet: show the key from its answer.
		m := d.Minted
		list, total = append([]projections.APIKeyRow{{ID: m.ID, WorkspaceID: q.ws.ID, Label: m.Label, AllowedWorkflowIDs: m.AllowedWorkflowIDs,
			ExpiresAt: m.ExpiresAt, CreatedAt: m.CreatedAt}}, list...), total+1
	}
	d.List, d.Pager = list, newPager(q, p, total)
	if d.Workflows, _, err = c.q.WorkflowsOf(q.ctx(), q.ws.ID, projections.Page{Page: 1, Limit: projections.MaxPageLimit}); err != nil {
		c.fail(q, err)
		return
	}
	if d.Minted != nil {
		// The list may not have the new key yet: the secret is the point of this answer.
		q.w.Header().Set("Cache-Control", "no-store")
	}
	c.renderView(q, status, "keys", "API keys", d, notice, errText)
}

func (c *Console) createKey(q *request, f keyForm) (commands.APIKeyMinted, error) {
	cmd := commands.CreateAPIKey{WorkspaceID: q.ws.ID, Label: strings.TrimSpace(f.Label), AllowedWorkflowIDs: f.Workflows}
	var err error
	if cmd.ExpiresAt, err = parseExpiry(f.Expires, c.now()); err != nil {
		return commands.APIKeyMinted{}, err
	}
	return c.cmds.Workspaces.CreateAPIKey(q.acting(), cmd)
}

// parseExpiry reads an expiry date of a form (the start of that day, UTC); "" never expires.
func parseExpiry(s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		return nil, domain.Invalid("expires", "must be a date (YYYY-MM-DD)")
	}
	if !t.After(now) {
		return nil, domain.Invalid("expires", "must be in the future")
	}
	return &t, nil
}

// revokeKey revokes a key of this workspace; another workspace's key is not found.
func (c *Console) revokeKey(q *request, id string) error {
	k, err := c.cmds.Workspaces.APIKey(q.ctx(), id)
	if err != nil {
		return err
	}
	if k.WorkspaceID != q.ws.ID {
		return domain.ErrNotFound
	}
	return c.cmds.Workspaces.RevokeAPIKeyWithReason(q.acting(), id, "revoked from the console by "+q.user.Email)
}
