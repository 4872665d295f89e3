package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/bulk"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/projections"
)

// The run page's re-run form and the workflow page's bulk form, with the bulk's progress page
// (docs/workflows.md, "Re-running a run" and "Bulk actions").

// rerunForm is the re-run form as posted, kept when the re-run was refused.
type rerunForm struct {
	FromStage, Iteration, Input string
}

// componentIDs are d's component ids but its triggers', the re-run form's fromStage choices.
func componentIDs(d workflow.Definition) []string {
	var out []string
	for _, c := range d.Components {
		if c.Module != workflow.ModuleTrigger {
			out = append(out, c.ID)
		}
	}
	return out
}

// rerunRun starts a re-run of the page's run (owners and admins) and shows the new run; a
// refused re-run shows the run page again with why and the form as posted.
func (c *Console) rerunRun(q *request) {
	st, err := c.loadRun(q)
	if err != nil {
		c.fail(q, err)
		return
	}
	if !c.requireManage(q) {
		return
	}
	f := rerunForm{FromStage: strings.TrimSpace(q.r.PostForm.Get("fromStage")), Iteration: strings.TrimSpace(q.r.PostForm.Get("iteration")),
		Input: strings.TrimSpace(q.r.PostForm.Get("input"))}
	cmd, err := rerunCommand(st.ID, f)
	if err == nil {
		var out commands.TriggeredRun
		if out, err = c.cmds.Workflows.RerunRun(q.acting(), cmd); err == nil {
			http.Redirect(q.w, q.r, "/dashboard/runs/"+url.PathEscape(out.RunID)+"?rerun=1", http.StatusSeeOther)
			return
		}
	}
	status, _, text := words(err, q.ws.Role)
	c.showRun(q, status, text, f)
}

// rerunCommand reads the re-run form: every field may be empty.
func rerunCommand(runID string, f rerunForm) (commands.RerunRun, error) {
	cmd := commands.RerunRun{RunID: runID, FromStage: f.FromStage}
	if f.Iteration != "" {
		n, err := strconv.Atoi(f.Iteration)
		if err != nil || n < 0 {
			return cmd, domain.Invalid("iteration", "must be a whole number from 0")
		}
		cmd.Iteration = &n
	}
	if f.Input != "" {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(f.Input), &obj) != nil || obj == nil {
			return cmd, domain.Invalid("input", "must be a JSON object (the trigger's input) or empty")
		}
		cmd.Input = json.RawMessage(f.Input)
	}
	return cmd, nil
}

// bulkForm is the bulk form as posted, kept when the bulk was refused.
type bulkForm struct {
	Action, Status, CreatedAfter, CreatedBefore, Reason string
}

// BulkStatuses are the run statuses the bulk form offers.
func (bulkForm) Statuses() []string { return []string{"CREATED", "EXECUTING", "COMPLETED", "FAILED"} }

// bulkRuns starts a bulk action on the workflow's runs (owners and admins) and shows its
// progress page; a refused bulk shows the workflow page again with why and the form as posted.
func (c *Console) bulkRuns(q *request) {
	wf, err := c.cmds.Workflows.Workflow(q.ctx(), q.ws.ID, mux.Vars(q.r)["workflowId"])
	if err != nil {
		c.fail(q, err)
		return
	}
	if !c.requireManage(q) {
		return
	}
	form := q.r.PostForm
	f := bulkForm{Action: form.Get("action"), Status: form.Get("status"), CreatedAfter: strings.TrimSpace(form.Get("createdAfter")),
		CreatedBefore: strings.TrimSpace(form.Get("createdBefore")), Reason: strings.TrimSpace(form.Get("reason"))}
	cmd := commands.StartBulk{WorkspaceID: q.ws.ID, WorkflowID: wf.ID, Action: bulk.Action(f.Action), Reason: f.Reason,
		Filter: bulk.Filter{Status: f.Status}, Runs: c.q}
	if cmd.Filter.CreatedAfter, err = formTime("filter.createdAfter", f.CreatedAfter); err == nil {
		cmd.Filter.CreatedBefore, err = formTime("filter.createdBefore", f.CreatedBefore)
	}
	if err == nil {
		var st bulk.State
		if st, err = c.cmds.Bulks.StartBulk(q.acting(), cmd); err == nil {
			http.Redirect(q.w, q.r, bulkHref(q.ws.ID, wf.ID, st.ID), http.StatusSeeOther)
			return
		}
	}
	status, _, text := words(err, q.ws.Role)
	d := newWorkflowData(wf)
	d.BulkForm = f
	// The page's links (its pager) are the workflow page's, not this form's POST-only path.
	q.r.URL.Path = strings.TrimSuffix(q.r.URL.Path, "/bulk")
	c.showWorkflow(q, wf, d, projections.Page{Page: 1, Limit: 20}, status, text)
}

// formTime reads a datetime-local field ("2026-11-26T09:30", UTC) or an ISO 8601 time.
func formTime(field, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			t = t.UTC()
			return &t, nil
		}
	}
	return nil, domain.Invalid(field, "must be a time such as 2026-11-26T09:30 (UTC)")
}

func bulkHref(wsID, workflowID, bulkID string) string {
	return "/workspaces/" + url.PathEscape(wsID) + "/workflows/" + url.PathEscape(workflowID) + "/bulks/" + url.PathEscape(bulkID)
}

type bulkPageData struct {
	Bulk         bulk.Detail
	WorkflowName string
	// Percent is how much of the bulk is marked, 0 to 100.
	Percent int
}

// bulkPage shows a bulk's progress; another workspace's bulk, or another workflow's, is not
// found.
func (c *Console) bulkPage(q *request) {
	vars := mux.Vars(q.r)
	st, err := c.cmds.Bulks.Bulk(q.ctx(), vars["bulkId"])
	if err == nil && (st.WorkspaceID != q.ws.ID || st.WorkflowID != vars["workflowId"]) {
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		c.errorPage(q, http.StatusNotFound, "Bulk action not found", "There is no bulk action with that id on this workflow.")
		return
	}
	if err != nil {
		c.fail(q, err)
		return
	}
	d := bulkPageData{Bulk: st.Detail(), WorkflowName: st.WorkflowID, Percent: 100}
	if wf, err := c.cmds.Workflows.Workflow(q.ctx(), q.ws.ID, st.WorkflowID); err == nil {
		d.WorkflowName = wf.Definition.Name
	}
	if d.Bulk.Matched > 0 {
		d.Percent = (d.Bulk.Done + d.Bulk.Failed) * 100 / d.Bulk.Matched
	}
	c.renderView(q, http.StatusOK, "bulk", "Bulk "+string(st.Action), d, "", "")
}
