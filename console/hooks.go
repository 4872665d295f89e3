package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/projections"
)

// rotatedHooks carries a hook's new URL and secret from the rotate form to the workflow page,
// which shows them once (oneTimeView); each workflow's page is its own cookie path.
func rotatedHooks(workflowID string) oneTimeView[commands.IssuedHook] {
	return oneTimeView[commands.IssuedHook]{cookie: "sy_rotated_hook", page: "/workflows/" + url.PathEscape(workflowID),
		purpose: "console-rotated-hook", ttl: 5 * time.Minute}
}

// rotateHook gives an ON_WEBHOOK component's hook a new token and secret (owners and admins)
// and redirects to the workflow page, which shows them once; the old URL stops working at once.
func (c *Console) rotateHook(q *request) {
	vars := mux.Vars(q.r)
	wf, err := c.cmds.Workflows.Workflow(q.ctx(), q.ws.ID, vars["workflowId"])
	if err != nil {
		c.fail(q, err)
		return
	}
	if !c.requireManage(q) {
		return
	}
	view := rotatedHooks(wf.ID)
	issued, err := c.cmds.Hooks.RotateHook(q.acting(), commands.RotateHook{WorkspaceID: q.ws.ID, WorkflowID: wf.ID, ComponentID: vars["componentId"]})
	if err == nil {
		err = view.hold(c, q, issued.ComponentID, issued)
	}
	if err == nil {
		redirectTo(q, view.page, url.Values{"rotated": {issued.ComponentID}})
		return
	}
	status, _, text := words(err, q.ws.Role)
	q.r.URL.Path = "/workspaces/" + q.ws.ID + view.page
	c.showWorkflow(q, wf, newWorkflowData(wf), projections.Page{Page: 1, Limit: 20}, status, text)
}

// hookNotice fills d's hooks and, after a rotation, the new URL and secret shown this once.
func (c *Console) hookNotice(q *request, d *workflowData) (string, error) {
	hooks, err := c.cmds.Hooks.ListHooks(q.ctx(), q.ws.ID, d.Workflow.ID)
	if err != nil {
		return "", err
	}
	d.Hooks = hooks
	id := q.r.URL.Query().Get("rotated")
	if id == "" || q.r.Method != http.MethodGet {
		return "", nil
	}
	if d.Rotated = rotatedHooks(d.Workflow.ID).take(c, q, id); d.Rotated != nil {
		return "New hook URL and secret for " + strings.TrimSpace(id) + ". Copy them now: they are not shown again, and the old URL no longer works.", nil
	}
	return "The new URL and secret were shown once and are not shown again. If they were not copied, rotate the hook again.", nil
}
