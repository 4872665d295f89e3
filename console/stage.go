package console

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

type stagePageData struct {
	RunID, RunStatus, WorkflowName string
	Stage                          stageRow
	// Input is what the stage was given: its execution's input, the trigger's body, or for a
	// stage without an execution the input the run built for it. InputNote says which.
	Input     json.RawMessage
	InputNote string
	// Execution is the execution that ran the stage's module, with its attempts; nil for the
	// trigger, a FOR_EACH, or a stage not submitted yet.
	Execution *execution.State
	Attempts  []execution.Attempt
	// Parent is the FOR_EACH stage an iteration belongs to.
	Parent *stageRow
}

// stagePage shows one stage of a run: its input, output, error and attempts, with a link to
// the execution that ran it.
func (c *Console) stagePage(q *request) {
	st, err := c.loadRun(q)
	if err == nil {
		err = c.renderStage(q, &st, mux.Vars(q.r)["stageId"])
	}
	if errors.Is(err, domain.ErrNotFound) {
		c.errorPage(q, http.StatusNotFound, "Stage not found", "There is no such stage of a run in your workspaces.")
		return
	}
	if err != nil {
		c.fail(q, err)
	}
}

func (c *Console) renderStage(q *request, st *run.State, stageID string) error {
	s, ok := st.Stage(stageID)
	if !ok {
		return domain.ErrNotFound
	}
	v := s.View()
	d := stagePageData{RunID: st.ID, RunStatus: runLabel(st.Detail()), WorkflowName: st.Definition.Name,
		Stage: stageRow{StageView: v, Status: viewLabel(v), Href: stageHref(st.ID, v.ID)}}
	if v.Status.Terminal() {
		d.Stage.Duration = duration(v.ExecutionDispatchedAt, v.UpdatedAt)
	}
	if p, ok := st.Stage(s.ParentStageID); ok {
		pv := p.View()
		d.Parent = &stageRow{StageView: pv, Status: viewLabel(pv), Href: stageHref(st.ID, pv.ID)}
	}
	switch {
	case s.Module == workflow.ModuleTrigger:
		d.Input, d.InputNote = st.Input, "The trigger's body: what the call that started the run sent."
	case s.Skipped:
		d.InputNote = "Skipped: every incoming edge's condition was false or came from a skipped stage, so it did not run."
	case s.ExecutionID != "":
		if err := c.stageExecution(q, &d, s.ExecutionID); err != nil {
			return err
		}
		if d.Execution == nil {
			d.Input, d.InputNote = st.StageInput(s), "Built from the upstream stages' outputs; the execution is not recorded yet."
		}
	default:
		d.Input, d.InputNote = st.StageInput(s), "Built from the upstream stages' outputs."
	}
	c.renderView(q, http.StatusOK, "stage", "Stage "+v.Name, d, "", "")
	return nil
}

// stageExecution adds the stage's execution and its attempts; one not written yet leaves
// Execution nil.
func (c *Console) stageExecution(q *request, d *stagePageData, id string) error {
	e, err := c.cmds.Executions.Execution(q.ctx(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if d.Attempts, err = c.cmds.Executions.ExecutionAttempts(q.ctx(), id); err != nil {
		return err
	}
	d.Execution, d.Input, d.InputNote = &e, e.Input, "The execution's input, built from the upstream stages' outputs."
	return nil
}
