package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/domain/authorization"
	"github.com/switchyard/switchyard/projections"
)

// The developer's apps, the staff review queue and a workspace's connected apps.

// ownApp loads an app the person owns (staff may look at any).
func (c *Console) ownApp(ctx context.Context, userID string, staff bool, clientID string) (app.State, error) {
	a, err := c.cmds.Apps.App(ctx, clientID)
	if err != nil {
		return a, err
	}
	if a.OwnerUserID != userID && !staff {
		return app.State{}, domain.ErrNotFound
	}
	return a, nil
}

func metadataFromForm(f url.Values) app.Metadata {
	var uris []string
	for _, l := range strings.Split(f.Get("redirect_uris"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			uris = append(uris, l)
		}
	}
	return app.Metadata{Name: f.Get("name"), Description: f.Get("description"), LogoURL: f.Get("logo_url"), RedirectURIs: uris, Scopes: f["scopes"]}
}

type devAppsData struct {
	Apps   []projections.AppRow
	Scopes []struct{ Name, Description string }
	Form   app.Metadata
	Public bool
}

func (c *Console) devApps(q *request) {
	d := devAppsData{Scopes: app.Scopes}
	status, errText := http.StatusOK, ""
	if q.r.Method == http.MethodPost {
		d.Form, d.Public = metadataFromForm(q.r.PostForm), q.r.PostForm.Get("public") == "on"
		id, err := c.cmds.Apps.RegisterApp(q.acting(), commands.RegisterApp{OwnerUserID: q.user.ID, Public: d.Public, Metadata: d.Form})
		if err == nil {
			http.Redirect(q.w, q.r, "/developer/apps/"+url.PathEscape(id), http.StatusSeeOther)
			return
		}
		var ve *domain.ValidationError
		if !errors.As(err, &ve) {
			c.fail(q, err)
			return
		}
		status, _, errText = words(err, "")
	}
	apps, err := c.q.AppsOfOwner(q.ctx(), q.user.ID)
	if err != nil {
		c.fail(q, err)
		return
	}
	d.Apps = apps
	c.renderView(q, status, "devapps", "Your apps", d, "", errText)
}

type devAppData struct {
	App      app.State
	Scopes   []struct{ Name, Description string }
	Secret   string
	Editable bool
	Issuer   string
}

func (c *Console) devApp(q *request) {
	ctx := q.acting()
	id := mux.Vars(q.r)["clientId"]
	a, err := c.ownApp(ctx, q.user.ID, q.user.Staff, id)
	if err != nil {
		c.errorPage(q, http.StatusNotFound, "App not found", "There is no app with that client id among yours.")
		return
	}
	d := devAppData{Scopes: app.Scopes, Issuer: c.idp.Issuer()}
	status, notice, errText := http.StatusOK, "", ""
	if q.r.Method == http.MethodPost {
		switch q.r.PostForm.Get("action") {
		case "edit":
			err, notice = c.cmds.Apps.UpdateApp(ctx, id, metadataFromForm(q.r.PostForm)), "Saved."
			if a.Status == app.StatusSubmitted {
				notice = "Saved. The edit took the app out of the review queue: submit it again when it is ready."
			}
		case "submit":
			err, notice = c.cmds.Apps.SubmitApp(ctx, id), "Submitted for review."
		case "secret":
			d.Secret, err = c.cmds.Apps.IssueAppSecret(ctx, id)
			notice = "A new client secret was issued; any earlier one no longer works."
			q.w.Header().Set("Cache-Control", "no-store")
		default:
			err = domain.Invalid("action", "must be edit, submit or secret")
		}
		if err != nil {
			notice = ""
			status, _, errText = words(err, "")
		}
		if a, err = c.cmds.Apps.App(ctx, id); err != nil {
			c.fail(q, err)
			return
		}
	}
	d.App, d.Editable = a, a.Status != app.StatusApproved
	c.renderView(q, status, "devapp", a.Metadata.Name, d, notice, errText)
}

type reviewData struct {
	Submitted []app.State
	Approved  []projections.AppRow
}

// review is the staff's app review queue. Each app waiting is shown as folded from its stream
// with its revision, and the approve form names that revision: an app edited after the page
// was loaded is not approved as edited (app.ErrRevisionChanged), the page says so and shows it
// again as it now is.
func (c *Console) review(q *request) {
	if !q.user.Staff {
		c.errorPage(q, http.StatusForbidden, "Staff only", "The review queue is for Switchyard staff; an operator can make you staff from the command line (docs/console.md).")
		return
	}
	status, notice, errText := http.StatusOK, "", ""
	if q.r.Method == http.MethodPost {
		if err := c.reviewAction(q); err != nil {
			status, _, errText = words(err, "")
			if errors.Is(err, app.ErrRevisionChanged) {
				errText = "Not approved: the app changed after this page was loaded. Review it again as it is now."
			}
		} else {
			notice = "Done."
		}
	}
	var d reviewData
	waiting, err := c.q.AppsWithStatus(q.ctx(), app.StatusSubmitted)
	if err == nil {
		d.Submitted, err = c.submittedNow(q.ctx(), waiting)
	}
	if err == nil {
		d.Approved, err = c.q.AppsWithStatus(q.ctx(), app.StatusApproved)
	}
	if err != nil {
		c.fail(q, err)
		return
	}
	c.renderView(q, status, "review", "Review queue", d, notice, errText)
}

// reviewAction approves (the revision the form names) or reverts the form's app.
func (c *Console) reviewAction(q *request) error {
	f := q.r.PostForm
	id := f.Get("client_id")
	if f.Get("action") == "approve" {
		rev, err := strconv.Atoi(f.Get("revision"))
		if err != nil || rev <= 0 {
			return domain.Invalid("revision", "must be the revision shown on the review page")
		}
		return c.cmds.Apps.ApproveApp(q.acting(), id, q.user.ID, rev)
	}
	// Reverting sends the app back to draft: its tokens stop working at once (every check
	// requires a live app); its authorizations stay, so users need not consent again once it
	// is approved again.
	return c.cmds.Apps.RevertApp(q.acting(), id, q.user.ID, f.Get("reason"))
}

// submittedNow folds each app the read model lists as submitted, so what the reviewer sees and
// the revision the form names come from one state; an app no longer submitted is left out.
func (c *Console) submittedNow(ctx context.Context, rows []projections.AppRow) ([]app.State, error) {
	out := make([]app.State, 0, len(rows))
	for _, row := range rows {
		a, err := c.cmds.Apps.App(ctx, row.ClientID)
		if err != nil {
			return nil, err
		}
		if a.Status == app.StatusSubmitted {
			out = append(out, a)
		}
	}
	return out, nil
}

type connectedData struct {
	List []projections.AuthorizationRow
}

// revokeIn revokes an authorization of the workspace. Owners and admins may revoke any; a
// member only their own.
func (c *Console) revokeIn(ctx context.Context, userID string, manages bool, workspaceID, id string) error {
	az, err := c.cmds.Apps.Authorization(ctx, id)
	if err != nil {
		return err
	}
	if az.WorkspaceID != workspaceID {
		return domain.ErrNotFound
	}
	if !manages && az.UserID != userID {
		return domain.Forbidden("only owners and admins disconnect another member's app")
	}
	return c.cmds.Apps.RevokeAuthorization(commands.WithMetadata(ctx, commands.Metadata{Actor: userID, Source: "console"}), id, authorization.ReasonUser)
}

func (c *Console) connectedApps(q *request) {
	var revoked, notice, errText string
	if q.r.Method == http.MethodPost {
		revoked = q.r.PostForm.Get("authorization_id")
		if err := c.revokeIn(q.ctx(), q.user.ID, q.ws.Manages, q.ws.ID, revoked); err != nil {
			errText, revoked = "Could not disconnect: "+message(err), ""
		} else {
			notice = "Disconnected. The app's tokens for this workspace stopped working."
		}
	}
	list, _, err := c.q.AuthorizationsOfWorkspace(q.ctx(), q.ws.ID, projections.Page{Page: 1, Limit: projections.MaxPageLimit})
	if err != nil {
		c.fail(q, err)
		return
	}
	// The read model may not have the revocation yet; the event store has.
	list = slices.DeleteFunc(list, func(a projections.AuthorizationRow) bool { return a.ID == revoked })
	c.renderView(q, http.StatusOK, "connected", "Connected apps", connectedData{List: list}, notice, errText)
}
