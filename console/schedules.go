package console

import (
	"net/http"
	"net/url"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/domain"
)

// scheduleAction pauses or resumes one of a workflow's schedules (owners and admins), then
// shows the workflow page again.
func (c *Console) scheduleAction(q *request) {
	vars := mux.Vars(q.r)
	wf, err := c.cmds.Workflows.Workflow(q.ctx(), q.ws.ID, vars["workflowId"])
	if err != nil {
		c.fail(q, err)
		return
	}
	if !c.requireManage(q) {
		return
	}
	switch q.r.PostForm.Get("action") {
	case "pause":
		_, err = c.cmds.Schedules.PauseSchedule(q.acting(), q.ws.ID, wf.ID, vars["componentId"])
	case "resume":
		_, err = c.cmds.Schedules.ResumeSchedule(q.acting(), q.ws.ID, wf.ID, vars["componentId"])
	default:
		err = domain.Invalid("action", "must be pause or resume")
	}
	if err != nil {
		c.fail(q, err)
		return
	}
	http.Redirect(q.w, q.r, "/workspaces/"+url.PathEscape(q.ws.ID)+"/workflows/"+url.PathEscape(wf.ID)+"#schedules", http.StatusSeeOther)
}
