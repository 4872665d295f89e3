package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/projections"
)

type workflowsData struct {
	List  []projections.WorkflowListItem
	Pager pager
}

func (c *Console) workflows(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	list, total, err := c.q.WorkflowsOf(q.ctx(), q.ws.ID, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	c.render(q, http.StatusOK, "workflows", "Workflows", workflowsData{List: list, Pager: newPager(q, p, total)})
}

type workflowData struct {
	Workflow workflow.State
	Graph    graph
	Runs     []projections.RunRow
	Pager    pager
	// Definition is the workflow's definition as JSON, for the config view.
	Definition json.RawMessage
	// Triggerable: the workflow has an ON_API_CALLED component to start a run from.
	Triggerable bool
	// Body is the trigger form's body, kept when it was refused.
	Body string
	// Schedules are the workflow's ON_SCHEDULE components with their next fires.
	Schedules []commands.ScheduleView
	// Events are the workflow's ON_EVENT components; Windows the debounce windows of its
	// triggers still gathering events (events.go).
	Events  []eventTrigger
	Windows []projections.OpenWindow
	// Bulks are the workflow's latest bulk actions; BulkForm the bulk form as posted.
	Bulks    []projections.BulkRow
	BulkForm bulkForm
	// Hooks are the hooks of the workflow's ON_WEBHOOK components, without credentials;
	// Rotated the one just rotated, with its URL and secret, shown once.
	Hooks   []commands.HookView
	Rotated *commands.IssuedHook
}

// workflow shows a workflow's graph, drawn from its definition, each component's config, and
// its runs; owners and admins start a run with a body of their choice (POST).
func (c *Console) workflow(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	wf, err := c.cmds.Workflows.Workflow(q.ctx(), q.ws.ID, mux.Vars(q.r)["workflowId"])
	if err != nil {
		c.fail(q, err)
		return
	}
	d := newWorkflowData(wf)
	status, errText := http.StatusOK, ""
	if q.r.Method == http.MethodPost {
		if !c.requireManage(q) {
			return
		}
		d.Body = q.r.PostForm.Get("body")
		err := c.triggerFromPage(q, wf, d.Body)
		if err == nil {
			return // redirected to the run
		}
		status, _, errText = words(err, q.ws.Role)
	}
	c.showWorkflow(q, wf, d, p, status, errText)
}

// showWorkflow renders the workflow page with d's forms as posted.
func (c *Console) showWorkflow(q *request, wf workflow.State, d workflowData, p projections.Page, status int, errText string) {
	var err error
	if d.Definition, err = json.Marshal(wf.Definition.WithoutSecrets()); err != nil {
		c.fail(q, err)
		return
	}
	runs, total, err := c.q.RunsOf(q.ctx(), q.ws.ID, projections.RunFilter{WorkflowID: wf.ID}, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	d.Runs, d.Pager = runs, newPager(q, p, total)
	if d.Schedules, err = c.cmds.Schedules.Schedules(q.ctx(), q.ws.ID, wf.ID); err != nil {
		c.fail(q, err)
		return
	}
	if d.Bulks, _, err = c.q.BulksOf(q.ctx(), q.ws.ID, wf.ID, projections.Page{Page: 1, Limit: 10}); err != nil {
		c.fail(q, err)
		return
	}
	if err := c.eventNotice(q, &d); err != nil {
		c.fail(q, err)
		return
	}
	notice, err := c.hookNotice(q, &d)
	if err != nil {
		c.fail(q, err)
		return
	}
	c.renderView(q, status, "workflow", wf.Definition.Name, d, notice, errText)
}

func newWorkflowData(wf workflow.State) workflowData {
	return workflowData{Workflow: wf, Graph: drawGraph(wf.Definition), Body: "{}", BulkForm: bulkForm{Action: "cancel"},
		Triggerable: slices.ContainsFunc(wf.Definition.Components, func(c workflow.Component) bool { return c.Module == workflow.ModuleTrigger })}
}

// triggerFromPage starts the workflow's runs with body, as POST /v1/sdk/workflows/:id does
// (an object, or empty for {}), and redirects to the run (or to the workflow's runs when its
// triggers started several).
func (c *Console) triggerFromPage(q *request, wf workflow.State, body string) error {
	input := json.RawMessage(`{}`)
	if strings.TrimSpace(body) != "" {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &obj) != nil || obj == nil {
			return domain.Invalid("body", "must be a JSON object (the trigger's input) or empty")
		}
		input = json.RawMessage(body)
	}
	runs, err := c.cmds.Workflows.TriggerWorkflow(q.acting(), commands.TriggerWorkflow{WorkspaceID: q.ws.ID, WorkflowID: wf.ID, Input: input})
	switch {
	case err != nil:
		return err
	case len(runs) == 0:
		return domain.Invalid("workflow", "has no %s component to start a run from", workflow.ModuleTrigger)
	case len(runs) == 1:
		http.Redirect(q.w, q.r, "/dashboard/runs/"+url.PathEscape(runs[0].RunID), http.StatusSeeOther)
	default:
		http.Redirect(q.w, q.r, "/workspaces/"+url.PathEscape(q.ws.ID)+"/runs?workflow="+url.QueryEscape(wf.ID), http.StatusSeeOther)
	}
	return nil
}
