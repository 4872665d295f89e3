package console

import (
	"net/http"

	"github.com/switchyard/switchyard/projections"
)

type billingData struct {
	Balance projections.Balance
	List    []projections.Transaction
	Pager   pager
}

// billing shows the balance (credit, usage, total) and the paginated transaction history.
func (c *Console) billing(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	// Folded from the billing stream: a top-up is visible as soon as it is acknowledged.
	b, err := c.cmds.Billing.Balance(q.ctx(), q.ws.ID)
	if err != nil {
		c.fail(q, err)
		return
	}
	list, total, err := c.q.Transactions(q.ctx(), q.ws.ID, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	c.render(q, http.StatusOK, "billing", "Billing", billingData{Balance: projections.Balance{Credit: b.Credit, Usage: b.Usage, Total: b.Total()},
		List: list, Pager: newPager(q, p, total)})
}
