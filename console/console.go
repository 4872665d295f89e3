// Package console serves the workspace console: the pages a signed-in person uses (sign-in
// itself excepted, which is identity's), with one layout and one navigation. From a
// workspace's home one click reaches its workflows, runs, executions, API keys, billing,
// connected apps, MCP tokens and members; the developer's apps and the staff review queue sit
// in the same navigation. Pages follow the workspace's roles (domain/access), call commands
// and queries, and show failures in words. docs/console.md describes it.
package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/mux"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/user"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/projections"
)

// Config configures the console.
type Config struct {
	// Cmds runs commands and folds single entities; required.
	Cmds *commands.Commands
	// Queries reads the read models; required.
	Queries *projections.Queries
	// Identity signs people in and verifies their sessions; required.
	Identity *identity.Provider
	// Logger receives failures the pages answer "Something went wrong" to.
	Logger logrus.FieldLogger
	// Now is the clock the pages show times against; default time.Now.
	Now func() time.Time
	// Workers lists the workers that polled for a workspace's tasks in the last minute, as the
	// instance serving the page saw them (the executor's task board); nil: none are known.
	Workers func(workspaceID string) []Worker
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a missing dependency, by name.
func (c Config) Validate() error {
	switch {
	case c.Cmds == nil:
		return errors.New("console: Cmds is required")
	case c.Queries == nil:
		return errors.New("console: Queries is required")
	case c.Identity == nil:
		return errors.New("console: Identity is required")
	}
	return nil
}

// Console serves the console's pages and their JSON twins.
type Console struct {
	cfg   Config
	cmds  *commands.Commands
	q     *projections.Queries
	idp   *identity.Provider
	log   logrus.FieldLogger
	pages *pages
}

// New builds the console.
func New(cfg Config) (*Console, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pg, err := loadPages()
	if err != nil {
		return nil, err
	}
	return &Console{cfg: cfg, cmds: cfg.Cmds, q: cfg.Queries, idp: cfg.Identity, log: cfg.Logger, pages: pg}, nil
}

// Mount adds the pages at the root and the JSON endpoints of apps, review and connected apps
// under v1 (session JWT as Bearer).
func (c *Console) Mount(root, v1 *mux.Router) {
	get, both := []string{http.MethodGet, http.MethodHead}, []string{http.MethodGet, http.MethodHead, http.MethodPost}
	root.HandleFunc("/", c.index).Methods(get...)
	root.Handle("/console/static/{file}", staticHandler()).Methods(get...)
	ws := func(path, section, scope string, h handler, methods []string) {
		root.HandleFunc("/workspaces/{workspaceId}"+path, c.page(section, scope, h)).Methods(methods...)
	}
	ws("", "home", "", c.home, get)
	ws("/workflows", "workflows", access.ScopeWorkspaceRead, c.workflows, get)
	ws("/workflows/{workflowId}", "workflows", access.ScopeWorkspaceRead, c.workflow, both)
	ws("/workflows/{workflowId}/bulk", "workflows", access.ScopeWorkspaceRead, c.bulkRuns, []string{http.MethodPost})
	ws("/workflows/{workflowId}/schedules/{componentId}", "workflows", access.ScopeWorkspaceRead, c.scheduleAction, []string{http.MethodPost})
	ws("/workflows/{workflowId}/bulks/{bulkId}", "workflows", access.ScopeWorkspaceRead, c.bulkPage, get)
	ws("/workflows/{workflowId}/hooks/{componentId}/rotate", "workflows", access.ScopeWorkspaceRead, c.rotateHook, []string{http.MethodPost})
	ws("/runs", "runs", access.ScopeWorkspaceRead, c.runs, get)
	ws("/executions", "executions", access.ScopeWorkspaceRead, c.executions, get)
	ws("/executions/{executionId}", "executions", access.ScopeWorkspaceRead, c.execution, both)
	ws("/executions/{executionId}/raw/{part:input|output|error}", "executions", access.ScopeWorkspaceRead, c.executionRaw, get)
	ws("/api-keys", "keys", access.ScopeWorkspaceRead, c.apiKeys, both)
	ws("/billing", "billing", access.ScopeReadBilling, c.billing, get)
	ws("/connected-apps", "connected", "", c.connectedApps, both)
	ws("/mcp-tokens", "mcp", access.ScopeWorkspaceAdmin, c.mcpTokens, both)
	ws("/modules", "modules", access.ScopeWorkspaceAdmin, c.modules, both)
	ws("/modules/{name}", "modules", access.ScopeWorkspaceAdmin, c.moduleEdit, both)
	ws("/members", "members", "", c.members, both)
	ws("/workers", "workers", access.ScopeWorkspaceRead, c.workers, get)
	root.HandleFunc("/developer/apps", c.page("apps", "", c.devApps)).Methods(both...)
	root.HandleFunc("/developer/apps/{clientId}", c.page("apps", "", c.devApp)).Methods(both...)
	root.HandleFunc("/review", c.page("review", "", c.review)).Methods(both...)
	root.HandleFunc("/dashboard/runs/{runId}", c.page("runs", "", c.runPage)).Methods(get...)
	root.HandleFunc("/dashboard/runs/{runId}/cancel", c.page("runs", "", c.cancelRun)).Methods(http.MethodPost)
	root.HandleFunc("/dashboard/runs/{runId}/rerun", c.page("runs", "", c.rerunRun)).Methods(http.MethodPost)
	root.HandleFunc("/dashboard/runs/{runId}/detail", c.runDetail).Methods(http.MethodGet)
	root.HandleFunc("/dashboard/runs/{runId}/stages/{stageId}/approval", c.page("runs", "", c.decideApproval)).Methods(http.MethodPost)
	root.HandleFunc("/dashboard/runs/{runId}/stages/{stageId}", c.page("runs", "", c.stagePage)).Methods(get...)
	c.mountAPI(v1)
}

// handler serves one console page for a signed-in person.
type handler func(q *request)

// request is one console request: who asks, in which workspace, with what grant.
type request struct {
	w      http.ResponseWriter
	r      *http.Request
	user   user.State
	csrf   string
	ws     workspaceView
	rights access.Rights
	// section is the navigation entry the page belongs to.
	section string
}

func (q *request) ctx() context.Context { return q.r.Context() }

// acting is the request's context with the signed-in person as the actor of commands.
func (q *request) acting() context.Context {
	return commands.WithMetadata(q.r.Context(), commands.Metadata{Actor: q.user.ID, Source: "console"})
}

// workspaceView is the workspace a page is about, as the layout shows it.
type workspaceView struct {
	ID, Name, Role string
	// Manages: the person may change the workspace (owners and admins).
	Manages bool
}

// page requires a browser session (else to sign-in and back), the CSRF token on POST, and, on
// a workspace's pages, access to it with scope (domain/access) before calling h.
func (c *Console) page(section, scope string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr, ok := c.idp.SignedIn(r)
		if !ok {
			http.Redirect(w, r, "/login?return_to="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		q := &request{w: w, r: r, section: section}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil || !c.idp.CheckCSRF(r) {
				c.errorPage(q, http.StatusForbidden, "This form has expired", "Go back, reload the page and try again.")
				return
			}
		}
		u, err := c.cmds.Identity.User(r.Context(), pr.UserID)
		if err != nil {
			c.fail(q, err)
			return
		}
		q.user, q.csrf = u, c.idp.CSRFToken(w, r)
		if wsID, ok := mux.Vars(r)["workspaceId"]; ok {
			if err := c.enter(q, wsID, scope); err != nil {
				c.fail(q, err)
				return
			}
		} else {
			c.defaultWorkspace(q)
		}
		h(q)
	}
}

// enter checks the person's access to the workspace and makes it the page's.
func (c *Console) enter(q *request, wsID, scope string) error {
	g, err := c.cmds.Workspaces.Access(q.ctx(), wsID, access.Caller{UserID: q.user.ID, Session: true}, scope)
	var se *access.ScopeError
	if err != nil && !errors.As(err, &se) {
		return err
	}
	// A member refused this page still gets the workspace's navigation with the refusal.
	st, werr := c.cmds.Workspaces.Workspace(q.ctx(), wsID)
	if werr != nil {
		return werr
	}
	role := st.Members[q.user.ID]
	q.rights = g
	q.ws = workspaceView{ID: st.ID, Name: st.Name, Role: role, Manages: access.Manages(role)}
	return err
}

// defaultWorkspace gives pages outside a workspace (apps, review) the navigation of the
// person's first workspace.
func (c *Console) defaultWorkspace(q *request) {
	list, err := c.q.WorkspacesOfUser(q.ctx(), q.user.ID)
	if err != nil || len(list) == 0 {
		return
	}
	role := list[0].Role
	q.ws = workspaceView{ID: list[0].ID, Name: list[0].Name, Role: role, Manages: access.Manages(role)}
}

// index is GET /: sign-in first, then the home of the person's first workspace.
func (c *Console) index(w http.ResponseWriter, r *http.Request) {
	c.page("home", "", func(q *request) {
		if q.ws.ID != "" {
			http.Redirect(q.w, q.r, "/workspaces/"+url.PathEscape(q.ws.ID), http.StatusSeeOther)
			return
		}
		c.render(q, http.StatusOK, "noworkspace", "Welcome", nil)
	})(w, r)
}

// requireManage answers pages whose action needs an owner or admin; false when refused.
func (c *Console) requireManage(q *request) bool {
	if q.ws.Manages {
		return true
	}
	c.fail(q, &access.ScopeError{Scope: access.ScopeWorkspaceAdmin})
	return false
}

// now is the console's clock.
func (c *Console) now() time.Time { return c.cfg.Now() }
