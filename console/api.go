package console

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/domain/user"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/web/bearer"
	"github.com/switchyard/switchyard/web/httperr"
)

// The JSON twins of the apps, review and connected-apps pages, under /v1 with the session JWT
// as Bearer (POST /v1/auth/login). Errors have the SPEC.md 7 body.

func (c *Console) mountAPI(v1 *mux.Router) {
	v1.HandleFunc("/developer/apps", c.api(c.apiApps)).Methods(http.MethodGet, http.MethodPost)
	v1.HandleFunc("/developer/apps/{clientId}", c.api(c.apiApp)).Methods(http.MethodGet, http.MethodPatch)
	v1.HandleFunc("/developer/apps/{clientId}/{action:submit|secret}", c.api(c.apiAppAction)).Methods(http.MethodPost)
	v1.HandleFunc("/review/apps", c.api(c.apiReviewQueue)).Methods(http.MethodGet)
	v1.HandleFunc("/review/apps/{clientId}/{action:approve|revert}", c.api(c.apiReview)).Methods(http.MethodPost)
	v1.HandleFunc("/workspaces/{workspaceId}/authorizations", c.api(c.apiAuthorizations)).Methods(http.MethodGet)
	v1.HandleFunc("/workspaces/{workspaceId}/authorizations/{id}", c.api(c.apiRevokeAuthorization)).Methods(http.MethodDelete)
}

type apiHandler func(w http.ResponseWriter, r *http.Request, u user.State)

// api requires a session JWT as Bearer.
func (c *Console) api(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, _ := bearer.Token(r)
		pr, err := c.idp.VerifyBearer(r.Context(), token)
		if err != nil || !pr.Session {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			httperr.Write(w, http.StatusUnauthorized, "a session token is required (POST /v1/auth/login)")
			return
		}
		u, err := c.cmds.Identity.User(r.Context(), pr.UserID)
		if err != nil {
			httperr.WriteErr(w, c.log, err)
			return
		}
		h(w, r, u)
	}
}

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
	Revision  int          `json:"revision"`
	HasSecret bool         `json:"hasSecret"`
	Metadata  app.Metadata `json:"metadata"`
}

func toJSON(a app.State) appJSON {
	return appJSON{ClientID: a.ClientID, Public: a.Public, Status: a.Status, Revision: a.Revision, HasSecret: a.SecretHash != "", Metadata: a.Metadata}
}

// decodeBody reads the request's JSON object into v, its text checked as sent (a decoded string
// would hide a lone surrogate); it answers a 400 itself.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBodyOf(w, r, v, false)
}

// decodeOptionalBody is decodeBody for a body that may be left out (v keeps its zero value).
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBodyOf(w, r, v, true)
}

func decodeBodyOf(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil && optional && len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		httperr.Write(w, http.StatusBadRequest, "body must be a JSON object: "+err.Error())
		return false
	}
	if err := domain.CheckJSONBody("body", body); err != nil {
		httperr.Write(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

// writeList writes a whole list as one page of the SPEC.md 4.9 envelope.
func writeList[T any](w http.ResponseWriter, list []T) {
	if list == nil {
		list = []T{}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"data": list, "total": len(list), "page": 1, "totalPages": min(1, len(list))})
}

func actingAs(r *http.Request, u user.State, source string) *http.Request {
	return r.WithContext(commands.WithMetadata(r.Context(), commands.Metadata{Actor: u.ID, Source: source}))
}

func (c *Console) apiApps(w http.ResponseWriter, r *http.Request, u user.State) {
	if r.Method == http.MethodGet {
		list, err := c.q.AppsOfOwner(r.Context(), u.ID)
		if err != nil {
			httperr.WriteErr(w, c.log, err)
			return
		}
		writeList(w, list)
		return
	}
	var b appBody
	if !decodeBody(w, r, &b) {
		return
	}
	ctx := actingAs(r, u, "dashboard-api").Context()
	id, err := c.cmds.Apps.RegisterApp(ctx, commands.RegisterApp{OwnerUserID: u.ID, Public: b.Public, Metadata: b.metadata()})
	if err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	c.writeApp(w, r, id, http.StatusCreated)
}

func (c *Console) writeApp(w http.ResponseWriter, r *http.Request, id string, status int) {
	a, err := c.cmds.Apps.App(r.Context(), id)
	if err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	httperr.JSON(w, status, toJSON(a))
}

func (c *Console) apiApp(w http.ResponseWriter, r *http.Request, u user.State) {
	ctx := actingAs(r, u, "dashboard-api").Context()
	id := mux.Vars(r)["clientId"]
	if _, err := c.ownApp(ctx, u.ID, u.Staff, id); err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	if r.Method == http.MethodPatch {
		var b appBody
		if !decodeBody(w, r, &b) {
			return
		}
		if err := c.cmds.Apps.UpdateApp(ctx, id, b.metadata()); err != nil {
			httperr.WriteErr(w, c.log, err)
			return
		}
	}
	c.writeApp(w, r, id, http.StatusOK)
}

func (c *Console) apiAppAction(w http.ResponseWriter, r *http.Request, u user.State) {
	ctx := actingAs(r, u, "dashboard-api").Context()
	id := mux.Vars(r)["clientId"]
	if _, err := c.ownApp(ctx, u.ID, u.Staff, id); err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	if mux.Vars(r)["action"] == "secret" {
		secret, err := c.cmds.Apps.IssueAppSecret(ctx, id)
		if err != nil {
			httperr.WriteErr(w, c.log, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		httperr.JSON(w, http.StatusOK, map[string]string{"clientId": id, "clientSecret": secret})
		return
	}
	if err := c.cmds.Apps.SubmitApp(ctx, id); err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	c.writeApp(w, r, id, http.StatusOK)
}

func (c *Console) apiReviewQueue(w http.ResponseWriter, r *http.Request, u user.State) {
	if !u.Staff {
		httperr.Write(w, http.StatusForbidden, "staff only")
		return
	}
	list, err := c.q.AppsWithStatus(r.Context(), app.StatusSubmitted)
	if err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	writeList(w, list)
}

func (c *Console) apiReview(w http.ResponseWriter, r *http.Request, u user.State) {
	if !u.Staff {
		httperr.Write(w, http.StatusForbidden, "staff only")
		return
	}
	ctx := actingAs(r, u, "review-api").Context()
	id := mux.Vars(r)["clientId"]
	var err error
	if mux.Vars(r)["action"] == "approve" {
		// The revision the reviewer saw (GET /v1/developer/apps/{clientId}): an app changed
		// since is refused with 409.
		var b struct {
			Revision int `json:"revision"`
		}
		if !decodeOptionalBody(w, r, &b) {
			return
		}
		err = c.cmds.Apps.ApproveApp(ctx, id, u.ID, b.Revision)
	} else {
		var b struct {
			Reason string `json:"reason"`
		}
		if !decodeOptionalBody(w, r, &b) {
			return
		}
		err = c.cmds.Apps.RevertApp(ctx, id, u.ID, b.Reason)
	}
	if err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	c.writeApp(w, r, id, http.StatusOK)
}

// member checks the person's membership of the route's workspace (domain/access).
func (c *Console) member(r *http.Request, u user.State) (access.Rights, error) {
	return c.cmds.Workspaces.Access(r.Context(), mux.Vars(r)["workspaceId"], access.Caller{UserID: u.ID, Session: true}, "")
}

func (c *Console) apiAuthorizations(w http.ResponseWriter, r *http.Request, u user.State) {
	if _, err := c.member(r, u); err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	pg, err := projections.PageFromQuery(r.URL.Query())
	if err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	list, total, err := c.q.AuthorizationsOfWorkspace(r.Context(), mux.Vars(r)["workspaceId"], pg)
	if err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"data": list, "total": total, "page": pg.Page, "totalPages": pg.TotalPages(total)})
}

func (c *Console) apiRevokeAuthorization(w http.ResponseWriter, r *http.Request, u user.State) {
	g, err := c.member(r, u)
	if err == nil {
		err = c.revokeIn(r.Context(), u.ID, g.Manages(), mux.Vars(r)["workspaceId"], mux.Vars(r)["id"])
	}
	if err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
