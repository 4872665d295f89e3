package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/reactors/livehub"
)

// The run page lives here rather than in identity's dashboard because it needs the run stream
// machinery of this package, which identity cannot import (this package imports identity).

//go:embed dashboard_run.html
var dashboardRunTemplate string

//go:embed dashboard_static
var dashboardStaticFS embed.FS

// dashboardTableLimit bounds the stage table: a FOR_EACH run has a stage per item and
// component, thousands of rows no one reads; the graph carries the counts of all of them.
const dashboardTableLimit = 500

// dashboardCSP lets the page load its script and styles from this origin only, and talk to
// this origin only (the detail fetch and the EventSource): no inline script, no third party.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

var (
	dashboardPages = template.Must(template.New("dashboard_run.html").Parse(dashboardRunTemplate))
	// dashboardAssetVersion is appended to the asset URLs so a deploy with changed assets is
	// never served a stale cached copy.
	dashboardAssetVersion = assetVersion()
)

func assetVersion() string {
	h := sha256.New()
	_ = fs.WalkDir(dashboardStaticFS, "dashboard_static", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := dashboardStaticFS.ReadFile(path)
			h.Write([]byte(path))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// DashboardRuns serves the run page of the dashboard: a run's workflow drawn as a graph with
// each stage's status, kept live by the run stream. It is signed in with the dashboard's
// session cookie and shows a run only to members of the run's workspace.
type DashboardRuns struct {
	Cmds *commands.Handler
	Hub  *livehub.Hub
	// Auth verifies the session cookie's JWT; identity.Provider is one.
	Auth BearerVerifier
	// Heartbeat is the interval of :ping comments on the page's stream (15s when 0).
	Heartbeat time.Duration
}

// Mount adds the page, its JSON, its stream and its assets to the root router.
func (d *DashboardRuns) Mount(root *mux.Router) {
	root.HandleFunc("/dashboard/runs/{runId}", d.page).Methods(http.MethodGet, http.MethodHead)
	root.HandleFunc("/dashboard/runs/{runId}/detail", d.detail).Methods(http.MethodGet)
	root.HandleFunc("/dashboard/runs/{runId}/stream", d.stream).Methods(http.MethodGet)
	root.Handle("/dashboard/static/{file}", dashboardStatic()).Methods(http.MethodGet, http.MethodHead)
}

func dashboardStatic() http.Handler {
	sub, _ := fs.Sub(dashboardStaticFS, "dashboard_static")
	fsrv := http.StripPrefix("/dashboard/static/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fsrv.ServeHTTP(w, r)
	})
}

// signedIn returns the user id of the request's session cookie, "" when there is no live
// session. Only a session JWT counts: an app's access token in the cookie is refused.
func (d *DashboardRuns) signedIn(r *http.Request) (string, error) {
	c, err := r.Cookie(identity.SessionCookie)
	if err != nil || c.Value == "" {
		return "", nil
	}
	p, err := d.Auth.VerifyBearer(r.Context(), c.Value)
	if errors.Is(err, identity.ErrInvalidToken) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !p.Session {
		return "", nil
	}
	return p.UserID, nil
}

// errRunHidden is a run that is unknown or of a workspace the user is not a member of: both
// answer 404, so run ids of other workspaces cannot be probed.
var errRunHidden = errors.New("run not found")

// member checks that userID is a member of the run's workspace.
func (d *DashboardRuns) member(ctx context.Context, userID, workspaceID string) (string, error) {
	ws, err := d.Cmds.Workspace(ctx, workspaceID)
	if errors.Is(err, domain.ErrNotFound) {
		return "", errRunHidden
	}
	if err != nil {
		return "", err
	}
	if ws.Members[userID] == "" {
		return "", errRunHidden
	}
	return ws.Name, nil
}

// load authenticates the request and loads the route's run for a member of its workspace.
func (d *DashboardRuns) load(r *http.Request) (userID string, st run.State, wsName string, err error) {
	if userID, err = d.signedIn(r); err != nil || userID == "" {
		return userID, st, "", err
	}
	st, err = d.Cmds.Run(r.Context(), mux.Vars(r)["runId"])
	if errors.Is(err, domain.ErrNotFound) {
		return userID, st, "", errRunHidden
	}
	if err != nil {
		return userID, st, "", err
	}
	wsName, err = d.member(r.Context(), userID, st.WorkspaceID)
	return userID, st, wsName, err
}

// apiFailure answers a JSON route's failure: 401 without a session, 404 for a hidden run.
func apiFailure(w http.ResponseWriter, r *http.Request, userID string, err error) bool {
	switch {
	case err == nil && userID == "":
		WriteError(w, http.StatusUnauthorized, "sign in to the dashboard first")
	case errors.Is(err, errRunHidden):
		WriteError(w, http.StatusNotFound, "run "+mux.Vars(r)["runId"]+" not found")
	case err != nil:
		WriteDomainError(w, r, err)
	default:
		return false
	}
	return true
}

// runPageData is what the page template renders.
type runPageData struct {
	Title         string
	Heading       string
	Message       string
	RunID         string
	WorkflowName  string
	WorkspaceName string
	Run           run.Detail
	Stages        []run.StageView
	HiddenStages  int
	Version       string
}

func (d *DashboardRuns) page(w http.ResponseWriter, r *http.Request) {
	userID, st, wsName, err := d.load(r)
	switch {
	case err == nil && userID == "":
		// As identity's dashboard pages: sign in, then come back here.
		http.Redirect(w, r, "/login?return_to="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	case errors.Is(err, errRunHidden):
		renderDashboard(w, r, http.StatusNotFound, "dashboard-error", runPageData{Title: "Run not found", Heading: "Run not found",
			Message: "There is no run with that id in your workspaces."})
		return
	case err != nil:
		LoggerFrom(r.Context()).WithError(err).Error("dashboard run page")
		renderDashboard(w, r, http.StatusInternalServerError, "dashboard-error", runPageData{Title: "Something went wrong",
			Heading: "Something went wrong", Message: "Try again in a moment."})
		return
	}
	det := st.Detail()
	data := runPageData{Title: "Run " + st.ID, RunID: st.ID, WorkflowName: st.Definition.Name, WorkspaceName: wsName, Run: det,
		Stages: det.RunStages}
	if len(data.Stages) > dashboardTableLimit {
		data.Stages, data.HiddenStages = data.Stages[:dashboardTableLimit], len(data.Stages)-dashboardTableLimit
	}
	renderDashboard(w, r, http.StatusOK, "run", data)
}

// renderDashboard renders to a buffer first so a template error is a clean 500, not half a
// page, with the headers identity's dashboard pages carry plus the script the page needs.
func renderDashboard(w http.ResponseWriter, r *http.Request, status int, name string, data runPageData) {
	data.Version = dashboardAssetVersion
	var buf bytes.Buffer
	if err := dashboardPages.ExecuteTemplate(&buf, name, data); err != nil {
		LoggerFrom(r.Context()).WithError(err).WithField("page", name).Error("render dashboard page")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// DashboardRunDetail is the page's JSON: the run detail (SPEC.md 2.4) with the workflow
// drawn, one entry per component of the definition the run started with.
type DashboardRunDetail struct {
	run.Detail
	WorkflowName string               `json:"workflowName"`
	Components   []DashboardComponent `json:"components"`
	Edges        []workflow.Edge      `json:"edges"`
}

// DashboardComponent is a component of the run's workflow with the progress of its stages.
// Its config is left out: the graph does not need it, and configs can hold values (headers,
// URLs) a read-only member need not see in every page load.
type DashboardComponent struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Module   string            `json:"module"`
	Position workflow.Position `json:"position"`
	Attempts int               `json:"attempts"`
	// Status is the stage's status, or for a FOR_EACH body the status of its iterations
	// taken together; NOT_STARTED before the component has a stage.
	Status string      `json:"status"`
	Counts StageCounts `json:"counts"`
	// ForEach is the FOR_EACH component this one runs in, once per item.
	ForEach string `json:"forEach,omitempty"`
	// Iterations is the number of items of the FOR_EACH (of this component, or the one it runs
	// in) once known.
	Iterations *int `json:"iterations"`
	// IterationsDone counts the items whose whole body completed (FOR_EACH components only).
	IterationsDone *int `json:"iterationsDone,omitempty"`
}

// StageCounts counts a component's stages by status.
type StageCounts struct {
	Created   int `json:"created"`
	Running   int `json:"running"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

func (c StageCounts) total() int { return c.Created + c.Running + c.Completed + c.Failed }

// StatusNotStarted is the status of a component that has no stage (yet) in the run.
const StatusNotStarted = "NOT_STARTED"

// dashboardDetail renders st for the page.
func dashboardDetail(st *run.State) DashboardRunDetail {
	def := st.Definition
	g := def.Graph()
	out := DashboardRunDetail{Detail: st.Detail(), WorkflowName: def.Name, Components: make([]DashboardComponent, len(def.Components)),
		Edges: def.Edges}
	if out.Edges == nil {
		out.Edges = []workflow.Edge{}
	}
	at := make(map[string]int, len(def.Components))
	for i, c := range def.Components {
		at[c.ID] = i
		out.Components[i] = DashboardComponent{ID: c.ID, Name: c.Name, Module: c.Module, Position: c.Position, Attempts: c.Attempts}
	}
	// FOR_EACH bodies: which loop each body component runs in, and the stage of each loop.
	bodyOf, bodySize := map[string]string{}, map[string]int{}
	loopStage := map[string]run.Stage{}
	for _, c := range def.Components {
		if c.Module != workflow.ModuleForEach {
			continue
		}
		for b := range g.Body(c.ID) {
			bodyOf[b] = c.ID
			bodySize[c.ID]++
		}
	}
	for _, s := range st.Stages {
		i, ok := at[s.ComponentID]
		if !ok {
			continue
		}
		cnt := &out.Components[i].Counts
		switch s.Status {
		case run.StageStatusCreated:
			cnt.Created++
		case run.StageStatusRunning:
			cnt.Running++
		case run.StageStatusCompleted:
			cnt.Completed++
		case run.StageStatusFailed:
			cnt.Failed++
		}
		if s.Module == workflow.ModuleForEach && s.Iteration == run.NoIteration {
			loopStage[s.ComponentID] = s
		}
	}
	items := map[string]*int{}
	for id, s := range loopStage {
		if n, ok := forEachItems(st, g, g.Components[id]); ok {
			items[id] = &n
		}
		done := iterationsDone(st, s.ID, bodySize[id])
		out.Components[at[id]].IterationsDone = &done
	}
	for i := range out.Components {
		c := &out.Components[i]
		c.ForEach = bodyOf[c.ID]
		switch {
		case c.Module == workflow.ModuleForEach:
			c.Iterations = items[c.ID]
		case c.ForEach != "":
			c.Iterations = items[c.ForEach]
		}
		c.Status = componentStatus(*c, st.Status.Terminal())
	}
	return out
}

// componentStatus is the colour of a component: its one stage's status, or, for a FOR_EACH
// body (a stage per item), RUNNING while any iteration is open or items are still to come,
// then FAILED if any failed, else COMPLETED.
func componentStatus(c DashboardComponent, runEnded bool) string {
	n := c.Counts
	switch {
	case n.total() == 0:
		return StatusNotStarted
	case n.Running > 0:
		return string(run.StageStatusRunning)
	case n.Created > 0:
		return string(run.StageStatusCreated)
	case c.ForEach != "" && c.Iterations != nil && n.Completed+n.Failed < *c.Iterations && !runEnded:
		// Between admissions of a bounded-concurrency loop: still in progress.
		return string(run.StageStatusRunning)
	case n.Failed > 0:
		return string(run.StageStatusFailed)
	}
	return string(run.StageStatusCompleted)
}

// forEachItems is the number of items a FOR_EACH iterates over, read from its upstream's
// output as the run read it; false while that is not known (or not an array).
func forEachItems(st *run.State, g workflow.Graph, c workflow.Component) (int, bool) {
	in := g.In[c.ID]
	if len(in) != 1 {
		return 0, false
	}
	cfg, err := workflow.ParseForEach(c.Config)
	if err != nil {
		return 0, false
	}
	for _, s := range st.Stages {
		if s.ComponentID != in[0].From || s.Iteration != run.NoIteration || s.Status != run.StageStatusCompleted {
			continue
		}
		v, ok := workflow.Lookup(s.Output, cfg.Items)
		var items []json.RawMessage
		if !ok || json.Unmarshal(v, &items) != nil || items == nil {
			return 0, false
		}
		return len(items), true
	}
	return 0, false
}

// iterationsDone counts the iterations of a FOR_EACH stage whose every body stage completed.
func iterationsDone(st *run.State, loopStageID string, bodySize int) int {
	if bodySize == 0 {
		return 0
	}
	completed := map[int]int{}
	for _, s := range st.Stages {
		if s.ParentStageID == loopStageID && s.Status == run.StageStatusCompleted {
			completed[s.Iteration]++
		}
	}
	done := 0
	for _, n := range completed {
		if n >= bodySize {
			done++
		}
	}
	return done
}

func (d *DashboardRuns) detail(w http.ResponseWriter, r *http.Request) {
	userID, st, _, err := d.load(r)
	if apiFailure(w, r, userID, err) {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusOK, dashboardDetail(&st))
}

// stream is the run stream (SPEC.md 2.6, 6.2) for the page: the SDK stream's events, with the
// session cookie instead of an API key, since a browser's EventSource cannot sign requests. It
// lasts until the run ends; a session ended meanwhile stops it at the next reconnect.
func (d *DashboardRuns) stream(w http.ResponseWriter, r *http.Request) {
	userID, err := d.signedIn(r)
	if apiFailure(w, r, userID, err) {
		return
	}
	id := mux.Vars(r)["runId"]
	if _, err := uuid.Parse(id); err != nil {
		apiFailure(w, r, userID, errRunHidden)
		return
	}
	name := commands.RunStream(id)
	watch := d.Hub.Watch(name) // before the state is read: nothing falls in between
	feed := &runFeed{store: d.Cmds.Store(), stream: name}
	first, err := feed.advance(r.Context())
	if err == nil && !feed.state.Exists {
		err = errRunHidden
	}
	if err == nil {
		_, err = d.member(r.Context(), userID, feed.state.WorkspaceID)
	}
	if err != nil {
		watch.Close()
		if !errors.Is(err, errRunHidden) {
			err = fmt.Errorf("dashboard run stream: %w", err)
		}
		apiFailure(w, r, userID, err)
		return
	}
	serveSSE(w, r, sseStream{watch: watch, src: feed, first: first, heartbeat: d.Heartbeat, name: name})
}
