package console

import (
	"net/http"

	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/projections"
)

type homeData struct {
	Balance    *projections.Balance
	Executions map[string]int
	Runs       []projections.RunRow
	Workflows  int
}

// home is a workspace's landing page: its balance, its recent runs and executions, and the
// sections one click away.
func (c *Console) home(q *request) {
	var d homeData
	if q.rights.Allows(access.ScopeReadBilling) {
		b, err := c.cmds.Billing.Balance(q.ctx(), q.ws.ID)
		if err != nil {
			c.fail(q, err)
			return
		}
		d.Balance = &projections.Balance{Credit: b.Credit, Usage: b.Usage, Total: b.Total()}
	}
	var err error
	if d.Executions, err = c.q.ExecutionCounts(q.ctx(), q.ws.ID); err != nil {
		c.fail(q, err)
		return
	}
	if d.Runs, _, err = c.q.RunsOf(q.ctx(), q.ws.ID, projections.RunFilter{}, projections.Page{Page: 1, Limit: 5}); err != nil {
		c.fail(q, err)
		return
	}
	if _, d.Workflows, err = c.q.WorkflowsOf(q.ctx(), q.ws.ID, projections.Page{Page: 1, Limit: 1}); err != nil {
		c.fail(q, err)
		return
	}
	c.render(q, http.StatusOK, "home", q.ws.Name, d)
}
