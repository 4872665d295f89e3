package console

import (
	"net/http"

	"github.com/gorilla/mux"

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
}

// workflow shows a workflow's graph, drawn from its definition, and its runs.
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
	runs, total, err := c.q.RunsOf(q.ctx(), q.ws.ID, projections.RunFilter{WorkflowID: wf.ID}, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	c.render(q, http.StatusOK, "workflow", wf.Definition.Name, workflowData{Workflow: wf, Graph: drawGraph(wf.Definition),
		Runs: runs, Pager: newPager(q, p, total)})
}
