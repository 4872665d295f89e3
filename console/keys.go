package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/apikey"
	"github.com/switchyard/switchyard/projections"
)

type keysData struct {
	List      []keyRow
	Pager     pager
	Workflows []projections.WorkflowListItem
	// Minted is the key just created: its secret is shown this once.
	Minted *mintedKey
	Form   keyForm
	// Revoking is the key whose revocation waits for a confirmation; LastActive when no other
	// key of the workspace would be left working.
	Revoking   *keyRow
	LastActive bool
}

// keyRow is a key of the list with its state in words.
type keyRow struct {
	projections.APIKeyRow
	// State is active, expired or revoked.
	State string
}

type keyForm struct {
	Label     string
	Workflows []string
	Expires   string
}

// mintedKey is what the one view of a new key shows.
type mintedKey struct {
	ID        string `json:"id"`
	APIKey    string `json:"apiKey"`
	APISecret string `json:"apiSecret"`
	Label     string `json:"label"`
}

// mintedKeys holds a new key's secret, sealed, from the create's redirect to the page that
// shows it once.
var mintedKeys = oneTimeView[mintedKey]{cookie: "sy_minted", page: "/api-keys", purpose: "console-one-time-api-key", ttl: 5 * time.Minute}

// apiKeys lists the workspace's API keys; owners and admins create them (post, redirect, then
// the secret shown once) and revoke them (after a confirmation).
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
		if d.Form, err = c.keyAction(q); err == nil {
			return // redirected
		}
		status, _, errText = words(err, q.ws.Role)
	}
	query := q.r.URL.Query()
	created, revoked := query.Get("created"), query.Get("revoked")
	switch {
	case created != "":
		if d.Minted = mintedKeys.take(c, q, created); d.Minted != nil {
			notice = "Key created. Copy the secret now: it is not shown again."
		} else {
			notice = "The key's secret was shown once and is not shown again. If it was not copied, revoke the key and create another."
		}
	case revoked != "":
		notice = "Key revoked: requests signed with it are refused from now on."
	}
	list, total, err := c.q.APIKeysOf(q.ctx(), q.ws.ID, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	rows := c.keyRows(q, list, created, revoked)
	d.List, d.Pager = rows, newPager(q, p, total+len(rows)-len(list))
	if id := query.Get("revoke"); id != "" && q.ws.Manages && q.r.Method == http.MethodGet {
		if err := c.confirmRevoke(q, &d, id); err != nil {
			c.fail(q, err)
			return
		}
	}
	if d.Workflows, _, err = c.q.WorkflowsOf(q.ctx(), q.ws.ID, projections.Page{Page: 1, Limit: projections.MaxPageLimit}); err != nil {
		c.fail(q, err)
		return
	}
	c.renderView(q, status, "keys", "API keys", d, notice, errText)
}

// keyAction runs the form's create or revoke and redirects to the page that shows the result,
// so reloading it repeats nothing. On failure it returns the form to show again.
func (c *Console) keyAction(q *request) (keyForm, error) {
	switch q.r.PostForm.Get("action") {
	case "create":
		f := keyForm{Label: q.r.PostForm.Get("label"), Workflows: q.r.PostForm["workflows"], Expires: q.r.PostForm.Get("expires")}
		m, err := c.createKey(q, f)
		if err == nil {
			err = mintedKeys.hold(c, q, m.ID, mintedKey{ID: m.ID, APIKey: m.APIKey, APISecret: m.APISecret, Label: m.Label})
		}
		if err != nil {
			return f, err
		}
		redirectTo(q, mintedKeys.page, url.Values{"created": {m.ID}})
		return f, nil
	case "revoke":
		id := q.r.PostForm.Get("key_id")
		if err := c.revokeKey(q, id); err != nil {
			return keyForm{}, err
		}
		redirectTo(q, mintedKeys.page, url.Values{"revoked": {id}})
		return keyForm{}, nil
	}
	return keyForm{}, domain.Invalid("action", "must be create or revoke")
}

// keyRows is the page of keys with the key just created or revoked as its stream has it.
func (c *Console) keyRows(q *request, list []projections.APIKeyRow, created, revoked string) []keyRow {
	rows := make([]keyRow, len(list))
	for i, k := range list {
		rows[i] = keyRow{APIKeyRow: k}
	}
	rows = withFresh(rows, created, revoked, func(id string) (keyRow, error) {
		k, err := c.apiKey(q, id)
		return keyRow{APIKeyRow: keyFromState(k)}, err
	})
	now := c.now()
	for i, k := range rows {
		rows[i].State = credentialState(k.RevokedAt, k.ExpiresAt, now)
	}
	return rows
}

func (r keyRow) rowID() string { return r.ID }

func (r keyRow) revokedAs(fresh keyRow) keyRow {
	r.RevokedAt, r.RevokeReason = fresh.RevokedAt, fresh.RevokeReason
	return r
}

// apiKey reads key id of this workspace from its stream; another workspace's key is not found.
func (c *Console) apiKey(q *request, id string) (apikey.State, error) {
	k, err := c.cmds.Workspaces.APIKey(q.ctx(), id)
	if err == nil && k.WorkspaceID != q.ws.ID {
		return apikey.State{}, domain.ErrNotFound
	}
	return k, err
}

func keyFromState(k apikey.State) projections.APIKeyRow {
	return projections.APIKeyRow{ID: k.ID, WorkspaceID: k.WorkspaceID, Label: k.Label, AllowedWorkflowIDs: k.AllowedWorkflowIDs,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, RevokeReason: k.RevokeReason, CreatedAt: k.CreatedAt}
}

// confirmRevoke fills the confirmation of revoking key id, warning harder when it is the
// workspace's last working key.
func (c *Console) confirmRevoke(q *request, d *keysData, id string) error {
	k, err := c.apiKey(q, id)
	if err != nil {
		return err
	}
	row := keyRow{APIKeyRow: keyFromState(k)}
	if row.State = credentialState(row.RevokedAt, row.ExpiresAt, c.now()); row.State != "active" {
		return nil // nothing to confirm: it works no more
	}
	active, err := c.q.ActiveAPIKeys(q.ctx(), q.ws.ID, c.now())
	if err != nil {
		return err
	}
	d.Revoking, d.LastActive = &row, active <= 1
	return nil
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
	if _, err := c.apiKey(q, id); err != nil {
		return err
	}
	return c.cmds.Workspaces.RevokeAPIKeyWithReason(q.acting(), id, "revoked from the console by "+q.user.Email)
}
