package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"mime"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/web/httperr"
)

// Approvals serves the approval URLs of WAIT stages (docs/workflows.md "Waits, signals and
// approvals"): /approvals/{token}, which works without a session so that it can be mailed.
// GET shows the question and never decides (mail scanners and link previews follow links);
// only POST decides, once: the stage's record makes a second decision a 409.
type Approvals struct {
	Cmds *commands.Commands
}

// Mount adds the routes at the root.
func (a *Approvals) Mount(root *mux.Router) {
	root.HandleFunc("/approvals/{token}", a.show).Methods(http.MethodGet)
	root.HandleFunc("/approvals/{token}", a.decide).Methods(http.MethodPost)
}

// approvalView is what the page shows.
type approvalView struct {
	Question, Workflow, Stage, Status, Message string
	Open                                       bool
}

// stage finds the approval stage a token names; a bad token, or one whose stage is gone, is
// domain.ErrNotFound.
func (a *Approvals) stage(r *http.Request) (run.State, run.Stage, error) {
	runID, stageID, err := a.Cmds.Waits.OpenApprovalToken(mux.Vars(r)["token"])
	if err != nil {
		return run.State{}, run.Stage{}, err
	}
	st, err := a.Cmds.Workflows.Run(r.Context(), runID)
	if err != nil {
		return st, run.Stage{}, err
	}
	stage, ok := st.Stage(stageID)
	if !ok || stage.Module != workflow.ModuleWait {
		return st, stage, domain.ErrNotFound
	}
	return st, stage, nil
}

func (a *Approvals) show(w http.ResponseWriter, r *http.Request) {
	st, stage, err := a.stage(r)
	if err != nil {
		a.refuse(w, r, err)
		return
	}
	v := approvalView{Workflow: st.WorkflowID, Stage: stage.Name, Status: string(stage.Status)}
	if stage.Waiting != nil {
		v.Question = stage.Waiting.Question
	}
	v.Open = !stage.Status.Terminal() && !st.Status.Terminal() && stage.Waiting != nil
	if !v.Open {
		v.Message = "This approval has been decided, has timed out, or its run has ended."
	}
	a.page(w, http.StatusOK, v)
}

func (a *Approvals) decide(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Approved *bool  `json:"approved"`
		By       string `json:"by"`
		Comment  string `json:"comment"`
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	asJSON := ct == "application/json"
	if asJSON {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			WriteError(w, http.StatusBadRequest, "body: "+jsonProblem(err))
			return
		}
	} else {
		if err := r.ParseForm(); err != nil {
			WriteError(w, http.StatusBadRequest, "body: must be a form (decision, by, comment)")
			return
		}
		switch r.PostForm.Get("decision") {
		case "approve":
			in.Approved = new(true)
		case "reject":
			in.Approved = new(false)
		}
		in.By, in.Comment = r.PostForm.Get("by"), r.PostForm.Get("comment")
	}
	if in.Approved == nil {
		field := "decision"
		if asJSON {
			field = "approved"
		}
		WriteError(w, http.StatusBadRequest, field+": is required: approve or reject")
		return
	}
	st, stage, err := a.stage(r)
	if err != nil {
		a.refuse(w, r, err)
		return
	}
	_, err = a.Cmds.Waits.Approve(r.Context(), commands.DecideApproval{RunID: st.ID, StageID: stage.ID,
		Approved: *in.Approved, By: in.By, Comment: in.Comment})
	if err != nil {
		if asJSON || !errors.Is(err, domain.ErrConflict) {
			WriteDomainError(w, r, err)
			return
		}
		a.page(w, http.StatusConflict, approvalView{Workflow: st.WorkflowID, Stage: stage.Name, Status: string(stage.Status),
			Message: "This approval has already been decided (or has timed out): an approval URL decides once."})
		return
	}
	if asJSON {
		WriteJSON(w, http.StatusOK, map[string]any{"runId": st.ID, "stageId": stage.ID, "approved": *in.Approved})
		return
	}
	verdict := "rejected"
	if *in.Approved {
		verdict = "approved"
	}
	a.page(w, http.StatusOK, approvalView{Workflow: st.WorkflowID, Stage: stage.Name, Status: string(run.StageStatusCompleted),
		Message: "Thank you: the stage is " + verdict + " and the run goes on."})
}

// refuse answers a token that does not verify, or names nothing, with 404 (saying nothing of
// which); anything else by the error table.
func (a *Approvals) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, domain.ErrNotFound) {
		writeRouteError(w, r, http.StatusNotFound, "approval not found", "This approval link is not valid.")
		return
	}
	WriteDomainError(w, r, err)
}

func (a *Approvals) page(w http.ResponseWriter, status int, v approvalView) {
	var buf bytes.Buffer
	if err := approvalPage.Execute(&buf, v); err != nil {
		WriteError(w, http.StatusInternalServerError, "internal error")
		return
	}
	w.Header().Set("Referrer-Policy", "no-referrer") // the URL is the credential
	httperr.HTML(w, status, "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'", buf.Bytes())
}

var approvalPage = template.Must(template.New("approval").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>Approval · Switchyard</title>
<link rel="stylesheet" href="/static/identity.css">
</head>
<body>
<header class="top"><span class="brand"><span class="mark" aria-hidden="true">⇄</span> Switchyard</span></header>
<main class="card" id="main">
<h1>Approval</h1>
{{if .Question}}<p class="lead">{{.Question}}</p>{{end}}
<p>Stage {{.Stage}} of workflow {{.Workflow}}: {{.Status}}</p>
{{if .Message}}<p role="status">{{.Message}}</p>{{end}}
{{if .Open}}
<form method="post">
<label for="by">Your name</label>
<input id="by" name="by" maxlength="200" autocomplete="name">
<label for="comment">Comment</label>
<textarea id="comment" name="comment" maxlength="2000" rows="3"></textarea>
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="reject">Reject</button>
</form>
{{end}}
</main>
</body>
</html>
`))
