package console

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/web/httperr"
)

// runStatuses are the run statuses the list filters by.
var runStatuses = []string{"CREATED", "EXECUTING", "COMPLETED", "FAILED"}

type runsData struct {
	List      []projections.RunRow
	Pager     pager
	Filter    projections.RunFilter
	Statuses  []string
	Workflows []projections.WorkflowListItem
}

func (c *Console) runs(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	f := projections.RunFilter{Status: q.r.URL.Query().Get("status"), WorkflowID: q.r.URL.Query().Get("workflow")}
	if f.Status != "" && !slices.Contains(runStatuses, f.Status) {
		c.fail(q, domain.Invalid("status", "must be one of %s", strings.Join(runStatuses, ", ")))
		return
	}
	list, total, err := c.q.RunsOf(q.ctx(), q.ws.ID, f, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	wfs, _, err := c.q.WorkflowsOf(q.ctx(), q.ws.ID, projections.Page{Page: 1, Limit: projections.MaxPageLimit})
	if err != nil {
		c.fail(q, err)
		return
	}
	c.render(q, http.StatusOK, "runs", "Runs", runsData{List: list, Pager: newPager(q, p, total), Filter: f, Statuses: runStatuses, Workflows: wfs})
}

// errRunHidden is a run that is unknown or of a workspace the person is not a member of: both
// answer 404, so run ids of other workspaces cannot be probed.
var errRunHidden = domain.ErrNotFound

// loadRun loads the route's run and enters its workspace; a run of a workspace the person is
// not a member of is not found.
func (c *Console) loadRun(q *request) (run.State, error) {
	st, err := c.cmds.Workflows.Run(q.ctx(), mux.Vars(q.r)["runId"])
	if err != nil {
		return st, err
	}
	if err := c.enter(q, st.WorkspaceID, access.ScopeWorkspaceRead); err != nil {
		if errors.Is(err, access.ErrNotMember) {
			return st, errRunHidden
		}
		return st, err
	}
	return st, nil
}

// dashboardTableLimit bounds the stage table: a FOR_EACH run has a stage per item and
// component, thousands of rows no one reads; the graph carries the counts of all of them.
const dashboardTableLimit = 500

type runPageData struct {
	RunID        string
	WorkflowName string
	WorkflowID   string
	Run          run.Detail
	Stages       []run.StageView
	HiddenStages int
	Cancellable  bool
}

// runPage is the live run page: the run's workflow drawn as a graph with each stage's status,
// kept current by run.js from the run stream.
func (c *Console) runPage(q *request) {
	st, err := c.loadRun(q)
	if errors.Is(err, domain.ErrNotFound) {
		c.errorPage(q, http.StatusNotFound, "Run not found", "There is no run with that id in your workspaces.")
		return
	}
	if err != nil {
		c.fail(q, err)
		return
	}
	det := st.Detail()
	data := runPageData{RunID: st.ID, WorkflowName: st.Definition.Name, WorkflowID: st.WorkflowID, Run: det, Stages: det.RunStages,
		Cancellable: q.ws.Manages && !st.Status.Terminal() && st.CancelAt.IsZero()}
	if len(data.Stages) > dashboardTableLimit {
		data.Stages, data.HiddenStages = data.Stages[:dashboardTableLimit], len(data.Stages)-dashboardTableLimit
	}
	notice := ""
	if q.r.URL.Query().Get("cancelled") == "1" {
		notice = "Cancel requested: running stages finish, no new ones start."
	}
	c.renderView(q, http.StatusOK, "run", "Run "+st.ID, data, notice, "")
}

// cancelRun asks for the run to stop (owners and admins), then shows the run page again.
func (c *Console) cancelRun(q *request) {
	st, err := c.loadRun(q)
	if err != nil {
		c.fail(q, err)
		return
	}
	if !c.requireManage(q) {
		return
	}
	reason := strings.TrimSpace(q.r.PostForm.Get("reason"))
	if reason == "" {
		reason = "cancelled from the console by " + q.user.Email
	}
	if _, err := c.cmds.Workflows.CancelRun(q.acting(), st.ID, reason); err != nil {
		c.fail(q, err)
		return
	}
	http.Redirect(q.w, q.r, "/dashboard/runs/"+url.PathEscape(st.ID)+"?cancelled=1", http.StatusSeeOther)
}

// runDetail is the run page's JSON (session cookie; members of the run's workspace).
func (c *Console) runDetail(w http.ResponseWriter, r *http.Request) {
	pr, ok := c.idp.SignedIn(r)
	if !ok {
		httperr.Write(w, http.StatusUnauthorized, "sign in to the console first")
		return
	}
	q := &request{w: w, r: r}
	q.user.ID = pr.UserID
	st, err := c.loadRun(q)
	if errors.Is(err, domain.ErrNotFound) {
		httperr.Write(w, http.StatusNotFound, "run "+mux.Vars(r)["runId"]+" not found")
		return
	}
	if err != nil {
		httperr.WriteErr(w, c.log, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httperr.JSON(w, http.StatusOK, runGraphDetail(&st))
}
