package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/projections"
)

// executionStatuses are the execution statuses the list filters by.
var executionStatuses = []string{"CREATED", "RUNNING", "COMPLETED", "FAILED"}

type executionsData struct {
	List     []projections.ExecutionRow
	Pager    pager
	Filter   projections.ExecutionFilter
	Statuses []string
	Modules  []string
}

func (c *Console) executions(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	f := projections.ExecutionFilter{Status: q.r.URL.Query().Get("status"), Module: q.r.URL.Query().Get("module")}
	if f.Status != "" && !slices.Contains(executionStatuses, f.Status) {
		c.fail(q, domain.Invalid("status", "must be one of %s", strings.Join(executionStatuses, ", ")))
		return
	}
	list, total, err := c.q.ExecutionsOf(q.ctx(), q.ws.ID, f, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	mods, err := c.q.ModulesUsedBy(q.ctx(), q.ws.ID)
	if err != nil {
		c.fail(q, err)
		return
	}
	c.render(q, http.StatusOK, "executions", "Executions", executionsData{List: list, Pager: newPager(q, p, total), Filter: f,
		Statuses: executionStatuses, Modules: mods})
}

type executionData struct {
	Execution execution.State
	Attempts  []execution.WebhookAttempt
	// CanReplay: an owner or admin, a finished execution with a callback.
	CanReplay bool
}

// execution shows one execution: input, output, error, usage and its callback's delivery
// attempts; POST replays the callback (owners and admins).
func (c *Console) execution(q *request) {
	id := mux.Vars(q.r)["executionId"]
	st, err := c.cmds.Executions.Execution(q.ctx(), id)
	if err == nil && st.WorkspaceID != q.ws.ID {
		err = domain.ErrNotFound // another workspace's: not found, so ids cannot be probed
	}
	if err != nil {
		c.fail(q, err)
		return
	}
	notice, errText := "", ""
	if q.r.Method == http.MethodPost {
		if !c.requireManage(q) {
			return
		}
		if st, err = c.cmds.Webhooks.ReplayWebhook(q.acting(), id); err != nil {
			errText = message(err)
		} else {
			notice = "Callback delivery requested again; the attempts below update as it runs."
		}
	}
	attempts, err := c.cmds.Webhooks.WebhookAttempts(q.ctx(), id)
	if err != nil {
		c.fail(q, err)
		return
	}
	d := executionData{Execution: st, Attempts: attempts,
		CanReplay: q.ws.Manages && st.Callback.URL != "" && st.Status.Terminal()}
	c.renderView(q, http.StatusOK, "execution", "Execution "+id, d, notice, errText)
}
