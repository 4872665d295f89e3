package console

import (
	"encoding/json"
	"net/http"
	"net/url"
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
	var err error
	if f.IDPrefix, err = idPrefix(q.r.URL.Query().Get("id")); err != nil {
		c.fail(q, err)
		return
	}
	list, total, err := c.q.ExecutionsOf(q.ctx(), q.ws.ID, f, p)
	if err == nil && total == 1 && len(f.IDPrefix) == len(list[0].ID) {
		// A whole id found: its page is what was asked for.
		http.Redirect(q.w, q.r, "/workspaces/"+url.PathEscape(q.ws.ID)+"/executions/"+url.PathEscape(list[0].ID), http.StatusSeeOther)
		return
	}
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

// idPrefix reads the id search of the executions list: an execution id or its beginning (hex
// digits and dashes, as ids are written), in any case.
func idPrefix(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > 36 || strings.Trim(s, "0123456789abcdef-") != "" {
		return "", domain.Invalid("id", "must be an execution id or its beginning (hex digits and dashes)")
	}
	return s, nil
}

type executionData struct {
	Execution execution.State
	// Runs are the module's attempts; Attempts the callback's delivery attempts.
	Runs     []execution.Attempt
	Attempts []execution.WebhookAttempt
	// CanReplay: an owner or admin, a finished execution with a callback.
	CanReplay bool
}

// execution shows one execution: input, output, error, usage and its callback's delivery
// attempts; POST replays the callback (owners and admins).
func (c *Console) execution(q *request) {
	id := mux.Vars(q.r)["executionId"]
	st, err := c.workspaceExecution(q, id)
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
	runs, err := c.cmds.Executions.ExecutionAttempts(q.ctx(), id)
	if err != nil {
		c.fail(q, err)
		return
	}
	d := executionData{Execution: st, Runs: runs, Attempts: attempts,
		CanReplay: q.ws.Manages && st.Callback.URL != "" && st.Status.Terminal()}
	c.renderView(q, http.StatusOK, "execution", "Execution "+id, d, notice, errText)
}

// workspaceExecution is the execution id of the page's workspace; another workspace's is not
// found, so ids cannot be probed.
func (c *Console) workspaceExecution(q *request, id string) (execution.State, error) {
	st, err := c.cmds.Executions.Execution(q.ctx(), id)
	if err == nil && st.WorkspaceID != q.ws.ID {
		err = domain.ErrNotFound
	}
	return st, err
}

// executionRaw downloads one document of an execution whole, as stored: its input, output or
// error, which the execution page shows cut to a bounded size (pretty). Its config is not
// offered, as the page does not show it: configs can hold credentials (http.request headers).
func (c *Console) executionRaw(q *request) {
	vars := mux.Vars(q.r)
	st, err := c.workspaceExecution(q, vars["executionId"])
	if err != nil {
		c.fail(q, err)
		return
	}
	part := vars["part"]
	raw := map[string]json.RawMessage{"input": st.Input, "output": st.Output, "error": st.Error}[part]
	if len(raw) == 0 || string(raw) == "null" {
		c.errorPage(q, http.StatusNotFound, "Nothing to download", "This execution has no "+part+" (yet).")
		return
	}
	h := q.w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="execution-`+st.ID+"-"+part+`.json"`)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	q.w.WriteHeader(http.StatusOK)
	_, _ = q.w.Write(raw)
}
