package identity

import (
	"context"
	"encoding/json"
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
	"github.com/switchyard/switchyard/domain/user"
	"github.com/switchyard/switchyard/projections"
)

// mountDashboard adds the developer dashboard, the staff review queue and the connected-apps
// pages (HTML, session cookie, CSRF-protected forms), and their JSON twins under /v1 (session
// JWT as Bearer).
func (p *Provider) mountDashboard(root, v1 *mux.Router) {
	root.HandleFunc("/developer/apps", p.page(p.devApps)).Methods(http.MethodGet, http.MethodPost)
	root.HandleFunc("/developer/apps/{clientId}", p.page(p.devApp)).Methods(http.MethodGet, http.MethodPost)
	root.HandleFunc("/review", p.page(p.review)).Methods(http.MethodGet, http.MethodPost)
	root.HandleFunc("/workspaces/{workspaceId}/connected-apps", p.page(p.connectedApps)).Methods(http.MethodGet, http.MethodPost)

	v1.HandleFunc("/developer/apps", p.api(p.apiApps)).Methods(http.MethodGet, http.MethodPost)
	v1.HandleFunc("/developer/apps/{clientId}", p.api(p.apiApp)).Methods(http.MethodGet, http.MethodPatch)
	v1.HandleFunc("/developer/apps/{clientId}/{action:submit|secret}", p.api(p.apiAppAction)).Methods(http.MethodPost)
	v1.HandleFunc("/review/apps", p.api(p.apiReviewQueue)).Methods(http.MethodGet)
	v1.HandleFunc("/review/apps/{clientId}/{action:approve|revert}", p.api(p.apiReview)).Methods(http.MethodPost)
	v1.HandleFunc("/workspaces/{workspaceId}/authorizations", p.api(p.apiAuthorizations)).Methods(http.MethodGet)
	v1.HandleFunc("/workspaces/{workspaceId}/authorizations/{id}", p.api(p.apiRevokeAuthorization)).Methods(http.MethodDelete)
}

// viewer is the signed-in user of a dashboard request.
type viewer struct {
	user.State
	SessionID string
}

// page requires a browser session (else to sign-in and back) and, for POST, the CSRF token.
func (p *Provider) page(h func(http.ResponseWriter, *http.Request, viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr, ok := p.session(r)
		if !ok {
			http.Redirect(w, r, "/login?return_to="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil || !checkCSRF(r) {
				p.errorPage(w, http.StatusForbidden, "This form has expired", "Go back, reload the page and try again.")
				return
			}
		}
		u, err := p.cmds.User(r.Context(), pr.UserID)
		if err != nil {
			p.log.WithError(err).Error("dashboard: load user")
			p.errorPage(w, http.StatusInternalServerError, "Something went wrong", "Try again in a moment.")
			return
		}
		h(w, r, viewer{State: u, SessionID: pr.SessionID})
	}
}

// api requires a session JWT as Bearer; errors have the SPEC.md 7 body.
func (p *Provider) api(h func(http.ResponseWriter, *http.Request, viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr, err := p.VerifyBearer(r.Context(), bearerToken(r))
		if err != nil || !pr.Session {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			apiError(w, http.StatusUnauthorized, "a session token is required (POST /v1/auth/login)")
			return
		}
		u, err := p.cmds.User(r.Context(), pr.UserID)
		if err != nil {
			p.apiDomainError(w, err)
			return
		}
		h(w, r, viewer{State: u, SessionID: pr.SessionID})
	}
}

func (p *Provider) apiDomainError(w http.ResponseWriter, err error) {
	var ve *domain.ValidationError
	switch {
	case errors.As(err, &ve):
		apiError(w, http.StatusBadRequest, ve.Error())
	case errors.Is(err, domain.ErrNotFound):
		apiError(w, http.StatusNotFound, "not found")
	case errors.Is(err, domain.ErrForbidden):
		apiError(w, http.StatusForbidden, "forbidden")
	case errors.Is(err, domain.ErrConflict), errors.Is(err, domain.ErrAlreadyExists):
		apiError(w, http.StatusConflict, err.Error())
	default:
		p.log.WithError(err).Error("dashboard request failed")
		apiError(w, http.StatusInternalServerError, "internal error")
	}
}

// ownApp loads an app the viewer owns (staff may look at any).
func (p *Provider) ownApp(ctx context.Context, v viewer, clientID string) (app.State, error) {
	a, err := p.cmds.App(ctx, clientID)
	if err != nil {
		return a, err
	}
	if a.OwnerUserID != v.ID && !v.Staff {
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
	CSRF   string
	User   viewer
	Apps   []projections.AppRow
	Scopes []consentScope
	Form   app.Metadata
	Public bool
	Error  string
}

func allScopes() []consentScope {
	out := make([]consentScope, len(app.Scopes))
	for i, s := range app.Scopes {
		out[i] = consentScope{Name: s.Name, Description: s.Description}
	}
	return out
}

func (p *Provider) devApps(w http.ResponseWriter, r *http.Request, v viewer) {
	data := devAppsData{CSRF: p.csrfToken(w, r), User: v, Scopes: allScopes()}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		data.Form, data.Public = metadataFromForm(r.PostForm), r.PostForm.Get("public") == "on"
		id, err := p.cmds.RegisterApp(r.Context(), commands.RegisterApp{OwnerUserID: v.ID, Public: data.Public, Metadata: data.Form})
		if err == nil {
			http.Redirect(w, r, "/developer/apps/"+id, http.StatusSeeOther)
			return
		}
		var ve *domain.ValidationError
		if !errors.As(err, &ve) {
			p.log.WithError(err).Error("register app")
			p.errorPage(w, http.StatusInternalServerError, "Something went wrong", "Try again in a moment.")
			return
		}
		data.Error, status = ve.Error(), http.StatusBadRequest
	}
	apps, err := p.queries.AppsOfOwner(r.Context(), v.ID)
	if err != nil {
		p.log.WithError(err).Error("list apps")
	}
	data.Apps = apps
	p.render(w, status, "devapps", "Your apps", data)
}

type devAppData struct {
	CSRF     string
	User     viewer
	App      app.State
	Scopes   []consentScope
	Secret   string
	Notice   string
	Error    string
	Editable bool
	Issuer   string
}

func (p *Provider) devApp(w http.ResponseWriter, r *http.Request, v viewer) {
	ctx := commands.WithMetadata(r.Context(), commands.Metadata{Actor: v.ID, Source: "dashboard"})
	id := mux.Vars(r)["clientId"]
	a, err := p.ownApp(ctx, v, id)
	if err != nil {
		p.errorPage(w, http.StatusNotFound, "App not found", "There is no app with that client id among yours.")
		return
	}
	data := devAppData{CSRF: p.csrfToken(w, r), User: v, Scopes: allScopes(), Issuer: p.issuer}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		switch r.PostForm.Get("action") {
		case "edit":
			err = p.cmds.UpdateApp(ctx, id, metadataFromForm(r.PostForm))
			data.Notice = "Saved."
		case "submit":
			err = p.cmds.SubmitApp(ctx, id)
			data.Notice = "Submitted for review."
		case "secret":
			data.Secret, err = p.cmds.IssueAppSecret(ctx, id)
			data.Notice = "A new client secret was issued; any earlier one no longer works."
		default:
			err = domain.Invalid("action", "unknown action")
		}
		if err != nil {
			data.Notice, data.Error = "", err.Error()
			status = http.StatusBadRequest
			if errors.Is(err, domain.ErrConflict) {
				status = http.StatusConflict
			}
		}
		if a, err = p.cmds.App(ctx, id); err != nil {
			p.errorPage(w, http.StatusInternalServerError, "Something went wrong", "Try again in a moment.")
			return
		}
	}
	data.App, data.Editable = a, a.Status != app.StatusApproved
	p.render(w, status, "devapp", a.Metadata.Name, data)
}

type reviewData struct {
	CSRF      string
	User      viewer
	Submitted []projections.AppRow
	Approved  []projections.AppRow
	Notice    string
}

func (p *Provider) review(w http.ResponseWriter, r *http.Request, v viewer) {
	if !v.Staff {
		p.errorPage(w, http.StatusForbidden, "Staff only", "The review queue is for Switchyard staff.")
		return
	}
	data := reviewData{CSRF: p.csrfToken(w, r), User: v}
	if r.Method == http.MethodPost {
		ctx := commands.WithMetadata(r.Context(), commands.Metadata{Actor: v.ID, Source: "review"})
		id := r.PostForm.Get("client_id")
		var err error
		if r.PostForm.Get("action") == "approve" {
			err = p.cmds.ApproveApp(ctx, id, v.ID)
		} else {
			err = p.revert(ctx, id, v.ID, r.PostForm.Get("reason"))
		}
		data.Notice = "Done."
		if err != nil {
			data.Notice = err.Error()
		}
	}
	data.Submitted, _ = p.queries.AppsWithStatus(r.Context(), app.StatusSubmitted)
	data.Approved, _ = p.queries.AppsWithStatus(r.Context(), app.StatusApproved)
	p.render(w, http.StatusOK, "review", "Review queue", data)
}

// revert sends the app back to draft. Its tokens stop working at once because every check
// requires a live app; its authorizations stay, so users need not consent again after the
// app is approved again.
func (p *Provider) revert(ctx context.Context, clientID, reviewerID, reason string) error {
	return p.cmds.RevertApp(ctx, clientID, reviewerID, reason)
}

type connectedData struct {
	CSRF      string
	User      viewer
	Workspace workspaceChoice
	List      []projections.AuthorizationRow
	CanRevoke bool
	Notice    string
}

// memberRole returns the viewer's role in the workspace, "" when not a member.
func (p *Provider) memberRole(ctx context.Context, v viewer, workspaceID string) (workspaceChoice, string) {
	ws, err := p.cmds.Workspace(ctx, workspaceID)
	if err != nil {
		return workspaceChoice{}, ""
	}
	role := ws.Members[v.ID]
	return workspaceChoice{ID: ws.ID, Name: ws.Name, Role: role}, role
}

// revokeIn revokes an authorization of the workspace. Owners and admins may revoke any; a
// member only their own.
func (p *Provider) revokeIn(ctx context.Context, v viewer, role, workspaceID, id string) error {
	az, err := p.cmds.Authorization(ctx, id)
	if err != nil {
		return err
	}
	if az.WorkspaceID != workspaceID {
		return domain.ErrNotFound
	}
	if role != "owner" && role != "admin" && az.UserID != v.ID {
		return domain.ErrForbidden
	}
	return p.cmds.RevokeAuthorization(commands.WithMetadata(ctx, commands.Metadata{Actor: v.ID, Source: "connected-apps"}), id, authorization.ReasonUser)
}

func (p *Provider) connectedApps(w http.ResponseWriter, r *http.Request, v viewer) {
	wsID := mux.Vars(r)["workspaceId"]
	ws, role := p.memberRole(r.Context(), v, wsID)
	if role == "" {
		p.errorPage(w, http.StatusForbidden, "Not a member", "You are not a member of that workspace.")
		return
	}
	data := connectedData{CSRF: p.csrfToken(w, r), User: v, Workspace: ws, CanRevoke: role == "owner" || role == "admin"}
	var revoked string
	if r.Method == http.MethodPost {
		revoked = r.PostForm.Get("authorization_id")
		if err := p.revokeIn(r.Context(), v, role, wsID, revoked); err != nil {
			data.Notice, revoked = "Could not disconnect: "+err.Error(), ""
		} else {
			data.Notice = "Disconnected. The app's tokens for this workspace stopped working."
		}
	}
	list, _, err := p.queries.AuthorizationsOfWorkspace(r.Context(), wsID, projections.Page{Page: 1, Limit: 100})
	if err != nil {
		p.log.WithError(err).Error("connected apps")
	}
	// The read model may not have the revocation yet; the event store has.
	data.List = slices.DeleteFunc(list, func(a projections.AuthorizationRow) bool { return a.ID == revoked })
	p.render(w, http.StatusOK, "connected", "Connected apps", data)
}

// JSON endpoints.

type appBody struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	LogoURL      string   `json:"logoUrl"`
	RedirectURIs []string `json:"redirectUris"`
	Scopes       []string `json:"scopes"`
	Public       bool     `json:"public"`
}

func (b appBody) metadata() app.Metadata {
	return app.Metadata{Name: b.Name, Description: b.Description, LogoURL: b.LogoURL, RedirectURIs: b.RedirectURIs, Scopes: b.Scopes}
}

type appJSON struct {
	ClientID  string       `json:"clientId"`
	Public    bool         `json:"public"`
	Status    string       `json:"status"`
	HasSecret bool         `json:"hasSecret"`
	Metadata  app.Metadata `json:"metadata"`
}

func toJSON(a app.State) appJSON {
	return appJSON{ClientID: a.ClientID, Public: a.Public, Status: a.Status, HasSecret: a.SecretHash != "", Metadata: a.Metadata}
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		apiError(w, http.StatusBadRequest, "body must be a JSON object: "+err.Error())
		return false
	}
	return true
}

func (p *Provider) apiApps(w http.ResponseWriter, r *http.Request, v viewer) {
	if r.Method == http.MethodGet {
		list, err := p.queries.AppsOfOwner(r.Context(), v.ID)
		if err != nil {
			p.apiDomainError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": list, "total": len(list), "page": 1, "totalPages": min(1, len(list))})
		return
	}
	var b appBody
	if !decodeBody(w, r, &b) {
		return
	}
	ctx := commands.WithMetadata(r.Context(), commands.Metadata{Actor: v.ID, Source: "dashboard-api"})
	id, err := p.cmds.RegisterApp(ctx, commands.RegisterApp{OwnerUserID: v.ID, Public: b.Public, Metadata: b.metadata()})
	if err != nil {
		p.apiDomainError(w, err)
		return
	}
	a, err := p.cmds.App(ctx, id)
	if err != nil {
		p.apiDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toJSON(a))
}

func (p *Provider) apiApp(w http.ResponseWriter, r *http.Request, v viewer) {
	ctx := commands.WithMetadata(r.Context(), commands.Metadata{Actor: v.ID, Source: "dashboard-api"})
	id := mux.Vars(r)["clientId"]
	if _, err := p.ownApp(ctx, v, id); err != nil {
		p.apiDomainError(w, err)
		return
	}
	if r.Method == http.MethodPatch {
		var b appBody
		if !decodeBody(w, r, &b) {
			return
		}
		if err := p.cmds.UpdateApp(ctx, id, b.metadata()); err != nil {
			p.apiDomainError(w, err)
			return
		}
	}
	a, err := p.cmds.App(ctx, id)
	if err != nil {
		p.apiDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toJSON(a))
}

func (p *Provider) apiAppAction(w http.ResponseWriter, r *http.Request, v viewer) {
	ctx := commands.WithMetadata(r.Context(), commands.Metadata{Actor: v.ID, Source: "dashboard-api"})
	id := mux.Vars(r)["clientId"]
	if _, err := p.ownApp(ctx, v, id); err != nil {
		p.apiDomainError(w, err)
		return
	}
	if mux.Vars(r)["action"] == "secret" {
		secret, err := p.cmds.IssueAppSecret(ctx, id)
		if err != nil {
			p.apiDomainError(w, err)
			return
		}
		noStore(w)
		writeJSON(w, http.StatusOK, map[string]string{"clientId": id, "clientSecret": secret})
		return
	}
	if err := p.cmds.SubmitApp(ctx, id); err != nil {
		p.apiDomainError(w, err)
		return
	}
	a, _ := p.cmds.App(ctx, id)
	writeJSON(w, http.StatusOK, toJSON(a))
}

func (p *Provider) apiReviewQueue(w http.ResponseWriter, r *http.Request, v viewer) {
	if !v.Staff {
		apiError(w, http.StatusForbidden, "staff only")
		return
	}
	list, err := p.queries.AppsWithStatus(r.Context(), app.StatusSubmitted)
	if err != nil {
		p.apiDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": list, "total": len(list), "page": 1, "totalPages": min(1, len(list))})
}

func (p *Provider) apiReview(w http.ResponseWriter, r *http.Request, v viewer) {
	if !v.Staff {
		apiError(w, http.StatusForbidden, "staff only")
		return
	}
	ctx := commands.WithMetadata(r.Context(), commands.Metadata{Actor: v.ID, Source: "review-api"})
	id := mux.Vars(r)["clientId"]
	var err error
	if mux.Vars(r)["action"] == "approve" {
		err = p.cmds.ApproveApp(ctx, id, v.ID)
	} else {
		var b struct {
			Reason string `json:"reason"`
		}
		_ = json.NewDecoder(r.Body).Decode(&b)
		err = p.revert(ctx, id, v.ID, b.Reason)
	}
	if err != nil {
		p.apiDomainError(w, err)
		return
	}
	a, _ := p.cmds.App(ctx, id)
	writeJSON(w, http.StatusOK, toJSON(a))
}

func (p *Provider) apiAuthorizations(w http.ResponseWriter, r *http.Request, v viewer) {
	wsID := mux.Vars(r)["workspaceId"]
	if _, role := p.memberRole(r.Context(), v, wsID); role == "" {
		apiError(w, http.StatusForbidden, "not a member of this workspace")
		return
	}
	pg := projections.Page{Page: 1, Limit: 20}
	q := r.URL.Query()
	if s := q.Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			apiError(w, http.StatusBadRequest, "page: must be an integer of at least 1")
			return
		}
		pg.Page = n
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			apiError(w, http.StatusBadRequest, "limit: must be an integer from 1 to 100")
			return
		}
		pg.Limit = n
	}
	list, total, err := p.queries.AuthorizationsOfWorkspace(r.Context(), wsID, pg)
	if err != nil {
		p.apiDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": list, "total": total, "page": pg.Page, "totalPages": pg.TotalPages(total)})
}

func (p *Provider) apiRevokeAuthorization(w http.ResponseWriter, r *http.Request, v viewer) {
	wsID := mux.Vars(r)["workspaceId"]
	_, role := p.memberRole(r.Context(), v, wsID)
	if role == "" {
		apiError(w, http.StatusForbidden, "not a member of this workspace")
		return
	}
	if err := p.revokeIn(r.Context(), v, role, wsID, mux.Vars(r)["id"]); err != nil {
		p.apiDomainError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
