package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/web/bearer"
)

// Workspaces serves the workspace endpoints of SPEC.md 4.9, called with an app's access token
// (bound to one workspace, with scopes) or a member's session JWT (with the member's role).
type Workspaces struct {
	Cmds    *commands.Commands
	Queries *projections.Queries
	Auth    bearer.Verifier
}

// Mount adds the routes under v1.
func (s *Workspaces) Mount(v1 *mux.Router) {
	r := v1.PathPrefix("/workspaces/{workspaceId}").Subrouter()
	r.MethodNotAllowedHandler = http.HandlerFunc(methodNotAllowed)
	r.Handle("/billing", s.with(access.ScopeReadBilling, s.billing)).Methods(http.MethodGet)
	r.Handle("/billing/transactions", s.with(access.ScopeReadBilling, s.transactions)).Methods(http.MethodGet)
	r.Handle("/workflows", s.with(access.ScopeWorkspaceRead, s.workflows)).Methods(http.MethodGet)
	r.Handle("/api-keys", s.with(access.ScopeAPIKeys, s.createAPIKey)).Methods(http.MethodPost)
	s.mountMCPTokens(r)
	s.mountWorkflows(r)
	s.mountHooks(r)
	s.mountModules(r)
}

// with authenticates the bearer, then checks the workspace and scope (commands.Access, by
// the rules of domain/access) before calling h.
func (s *Workspaces) with(scope string, h func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return s.withRights(scope, func(w http.ResponseWriter, r *http.Request, ws string, _ access.Rights) { h(w, r, ws) })
}

// withRights is with for a handler whose command depends on the caller's rights (only an
// owner may let a module reach private addresses).
func (s *Workspaces) withRights(scope string, h func(http.ResponseWriter, *http.Request, string, access.Rights)) http.Handler {
	return BearerAuth(s.Auth, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws := mux.Vars(r)["workspaceId"]
		p, _ := PrincipalFrom(r.Context())
		rights, err := s.Cmds.Workspaces.Access(r.Context(), ws, p.Caller(), scope)
		if err != nil {
			var se *access.ScopeError
			if errors.As(err, &se) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard", error="insufficient_scope", scope="`+se.Scope+`"`)
			}
			WriteDomainError(w, r, err)
			return
		}
		h(w, r, ws, rights)
	}))
}

func (s *Workspaces) billing(w http.ResponseWriter, r *http.Request, ws string) {
	// Folded from the billing stream: a top-up is visible as soon as it is acknowledged.
	b, err := s.Cmds.Billing.Balance(r.Context(), ws)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, projections.Balance{Credit: b.Credit, Usage: b.Usage, Total: b.Total()})
}

func (s *Workspaces) transactions(w http.ResponseWriter, r *http.Request, ws string) {
	ServePage(w, r, func(ctx context.Context, p projections.Page) ([]projections.Transaction, int, error) {
		return s.Queries.Transactions(ctx, ws, p)
	})
}

func (s *Workspaces) workflows(w http.ResponseWriter, r *http.Request, ws string) {
	ServePage(w, r, func(ctx context.Context, p projections.Page) ([]projections.WorkflowListItem, int, error) {
		return s.Queries.WorkflowsOf(ctx, ws, p)
	})
}

func (s *Workspaces) createAPIKey(w http.ResponseWriter, r *http.Request, ws string) {
	var body struct {
		Label              string     `json:"label"`
		AllowedWorkflowIDs []string   `json:"allowedWorkflowIds"`
		ExpiresAt          *time.Time `json:"expiresAt"`
	}
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	m, err := s.Cmds.Workspaces.CreateAPIKey(withActor(r), commands.CreateAPIKey{WorkspaceID: ws, Label: body.Label,
		AllowedWorkflowIDs: body.AllowedWorkflowIDs, ExpiresAt: body.ExpiresAt})
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusCreated, m)
}
