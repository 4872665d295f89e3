package console

import (
	"encoding/json"
	"errors"
	"fmt"
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
	// Status is the run's status as the page says it (CANCELED for a canceled run).
	Status string
	// ErrorText is the run's failure in words (runErrorText).
	ErrorText string
	// Canceled counts the stages the cancel stopped.
	Canceled int
	// Duration is how long the run took, or has been going.
	Duration     string
	TriggerBody  json.RawMessage
	Stages       []stageRow
	HiddenStages int
	Cancellable  bool
	// Rerunnable: the run ended and the person may re-run it (the re-run form).
	Rerunnable bool
	RerunForm  rerunForm
	// Components are the ids of the run's components, for the re-run form's fromStage.
	Components []string
	// Waits are the stages waiting for a time, a signal or an approval (waits.go).
	Waits []waitRow
}

// stageRow is a stage of the run page's table.
type stageRow struct {
	run.StageView
	// Status is the stage's status as the page says it (stageLabel).
	Status   string
	Duration string
	// Href is the stage's own page: input, output, error, attempts.
	Href string
}

// runPage is the live run page: the run's workflow drawn as a graph with each stage's status,
// kept current by run.js from the run stream, the trigger's body and a row per stage that
// opens the stage's page.
func (c *Console) runPage(q *request) { c.showRun(q, http.StatusOK, "", rerunForm{}) }

// showRun renders the run page, with errText and the re-run form as posted when a re-run was
// refused.
func (c *Console) showRun(q *request, status int, errText string, form rerunForm) {
	st, err := c.loadRun(q)
	if errors.Is(err, domain.ErrNotFound) {
		c.errorPage(q, http.StatusNotFound, "Run not found", "There is no run with that id in your workspaces.")
		return
	}
	if err != nil {
		c.fail(q, err)
		return
	}
	det := c.cmds.Waits.RunDetail(&st)
	data := runPageData{RunID: st.ID, WorkflowName: st.Definition.Name, WorkflowID: st.WorkflowID, Run: det, Status: runLabel(det),
		ErrorText: runErrorText(&st), Canceled: canceledStages(&st), Duration: c.runDuration(&st), TriggerBody: st.Input,
		Cancellable: q.ws.Manages && !st.Status.Terminal() && st.CancelAt.IsZero(),
		Rerunnable:  q.ws.Manages && st.Status.Terminal(), RerunForm: form, Components: componentIDs(st.Definition)}
	data.Waits = c.waitRows(q, det)
	stages := det.RunStages
	if len(stages) > dashboardTableLimit {
		stages, data.HiddenStages = stages[:dashboardTableLimit], len(stages)-dashboardTableLimit
	}
	data.Stages = make([]stageRow, len(stages))
	for i, v := range stages {
		data.Stages[i] = stageRow{StageView: v, Status: viewLabel(v), Href: stageHref(st.ID, v.ID)}
		if v.Status.Terminal() {
			data.Stages[i].Duration = duration(v.ExecutionDispatchedAt, v.UpdatedAt)
		}
	}
	notice := ""
	switch {
	case q.r.URL.Query().Get("cancelled") == "1":
		notice = "Cancel requested: running stages finish, no new ones start."
	case q.r.URL.Query().Get("finished") == "1":
		notice = "The run had already finished: there was nothing to cancel."
	case q.r.URL.Query().Get("approval") == "1":
		notice = "Decision recorded: the stage completed and the run goes on."
	case q.r.URL.Query().Get("decided") == "1":
		notice = "That approval had already been decided, or had timed out."
	case q.r.URL.Query().Get("rerun") == "1":
		notice = "A re-run of run " + st.RerunOf + "."
	case st.Waiting():
		notice = waitingNotice(&st)
	}
	c.renderView(q, status, "run", "Run "+st.ID, data, notice, errText)
}

// runDuration is how long the run took, or, while it goes on, has taken so far.
func (c *Console) runDuration(st *run.State) string {
	if st.Status.Terminal() {
		return duration(st.CreatedAt, st.UpdatedAt)
	}
	return duration(st.CreatedAt, c.now())
}

func stageHref(runID, stageID string) string {
	return "/dashboard/runs/" + url.PathEscape(runID) + "/stages/" + url.PathEscape(stageID)
}

// cancelRun asks for the run to stop (owners and admins), then shows the run page again; a run
// that finished meanwhile shows the page saying so.
func (c *Console) cancelRun(q *request) {
	st, err := c.loadRun(q)
	if err != nil {
		c.fail(q, err)
		return
	}
	if !c.requireManage(q) {
		return
	}
	page := "/dashboard/runs/" + url.PathEscape(st.ID)
	if st.Status.Terminal() {
		http.Redirect(q.w, q.r, page+"?finished=1", http.StatusSeeOther)
		return
	}
	reason := strings.TrimSpace(q.r.PostForm.Get("reason"))
	if reason == "" {
		reason = "cancelled from the console by " + q.user.Email
	}
	_, err = c.cmds.Workflows.CancelRun(q.acting(), st.ID, reason)
	switch {
	case errors.Is(err, domain.ErrConflict): // it finished between the load and the cancel
		http.Redirect(q.w, q.r, page+"?finished=1", http.StatusSeeOther)
	case err != nil:
		c.fail(q, err)
	default:
		http.Redirect(q.w, q.r, page+"?cancelled=1", http.StatusSeeOther)
	}
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
	d := runGraphDetail(&st)
	d.Duration = c.runDuration(&st)
	httperr.JSON(w, http.StatusOK, d)
}

// waitingNotice says why a CREATED run has not started: it waits for a slot of its
// concurrency key.
func waitingNotice(st *run.State) string {
	return fmt.Sprintf("Waiting for a slot: at most %d run(s) with concurrency key “%s” run at once; this one starts when one of them ends, in trigger order.",
		st.Definition.Concurrency.Limit, st.ConcurrencyKey)
}
