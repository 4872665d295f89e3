package console

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

// waitRow is a WAIT stage that waits, as the run page lists it.
type waitRow struct {
	StageID, Name string
	run.WaitingFor
	// CanDecide: an approval the person may decide here (owners and admins, as for cancel).
	CanDecide bool
}

// waitRows lists the run's waiting stages. The approval URL is shown only to those who may
// decide: it decides without a session, so it is worth what the form is.
func (c *Console) waitRows(q *request, det run.Detail) []waitRow {
	var rows []waitRow
	for _, v := range det.RunStages {
		if v.WaitingFor == nil {
			continue
		}
		r := waitRow{StageID: v.ID, Name: v.Name, WaitingFor: *v.WaitingFor}
		if r.Name == "" {
			r.Name = v.ReferenceID
		}
		r.CanDecide = r.Kind == workflow.WaitApproval && q.ws.Manages
		if !r.CanDecide {
			r.ApprovalURL = ""
		}
		rows = append(rows, r)
	}
	return rows
}

// decideApproval records an owner's or admin's decision on an approval stage of the run, then
// shows the run page again; one decided meanwhile says so.
func (c *Console) decideApproval(q *request) {
	st, err := c.loadRun(q)
	if err != nil {
		c.fail(q, err)
		return
	}
	if !c.requireManage(q) {
		return
	}
	page := "/dashboard/runs/" + url.PathEscape(st.ID)
	decision := q.r.PostForm.Get("decision")
	if decision != "approve" && decision != "reject" {
		c.showRun(q, http.StatusBadRequest, "decision: approve or reject", rerunForm{})
		return
	}
	_, err = c.cmds.Waits.Approve(q.acting(), commands.DecideApproval{WorkspaceID: st.WorkspaceID, RunID: st.ID,
		StageID: mux.Vars(q.r)["stageId"], Approved: decision == "approve", By: q.user.Email, Comment: q.r.PostForm.Get("comment")})
	switch {
	case errors.Is(err, domain.ErrConflict):
		http.Redirect(q.w, q.r, page+"?decided=1", http.StatusSeeOther)
	case err != nil:
		c.fail(q, err)
	default:
		http.Redirect(q.w, q.r, page+"?approval=1", http.StatusSeeOther)
	}
}
