package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/module"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/projections"
)

// modulesData is the modules page: the workspace's modules, the register form and a
// deletion waiting for its confirmation.
type modulesData struct {
	List     []projections.ModuleRow
	Pager    pager
	Form     moduleForm
	Deleting *projections.ModuleRow
}

// moduleForm is a module's settings as the form holds them. It never holds the secret: a
// secret typed in goes to the command and is not shown again, even on a refused form.
type moduleForm struct {
	Name, Description                       string
	InputSchema, ConfigSchema, OutputSchema string
	Price, TimeoutMs, Concurrency           string
	Type, URL                               string
	Cacheable, AllowPrivate                 bool
	// Signed: the module has a secret (edit form: empty keeps it).
	Signed bool
	// Owner: the person may set allowPrivate.
	Owner bool
	// Version is the module's, on the edit form.
	Version int
}

// modules lists the workspace's modules, registers one (post, redirect) and deletes one
// (after a confirmation); for owners and admins, as the /v1 endpoints are.
func (c *Console) modules(q *request) {
	p, ok := c.listPage(q)
	if !ok {
		return
	}
	d := modulesData{Form: moduleForm{Type: execution.TransportWorker, Price: "1", TimeoutMs: "60000"}}
	notice, errText, status := "", "", http.StatusOK
	if q.r.Method == http.MethodPost {
		var err error
		if d.Form, err = c.moduleAction(q); err == nil {
			return // redirected
		}
		status, _, errText = words(err, q.ws.Role)
	}
	d.Form.Owner = q.ws.Role == workspace.RoleOwner
	query := q.r.URL.Query()
	registered, deleted := query.Get("registered"), query.Get("deleted")
	switch {
	case registered != "":
		notice = "Module " + registered + " registered: submits and workflows may use it now."
	case deleted != "":
		notice = "Module " + deleted + " deleted: new submits naming it are refused; its tasks in flight finish."
	}
	list, total, err := c.q.ModulesOf(q.ctx(), q.ws.ID, p)
	if err != nil {
		c.fail(q, err)
		return
	}
	d.List, d.Pager = c.freshModules(q, list, registered, deleted), newPager(q, p, total)
	if name := query.Get("delete"); name != "" && q.r.Method == http.MethodGet {
		m, err := c.cmds.Modules.Get(q.ctx(), q.ws.ID, name)
		if err != nil {
			c.fail(q, err)
			return
		}
		v := projections.ModuleView(m)
		d.Deleting = &v
	}
	c.renderView(q, status, "modules", "Modules", d, notice, errText)
}

// freshModules is the page's list with the module just registered or deleted as its stream
// has it: the read model may not have caught up with the redirect.
func (c *Console) freshModules(q *request, list []projections.ModuleRow, registered, deleted string) []projections.ModuleRow {
	if deleted != "" {
		list = slicesDeleteName(list, deleted)
	}
	if registered != "" && indexOfName(list, registered) < 0 {
		if m, err := c.cmds.Modules.Get(q.ctx(), q.ws.ID, registered); err == nil {
			list = append([]projections.ModuleRow{projections.ModuleView(m)}, list...)
		}
	}
	return list
}

func indexOfName(list []projections.ModuleRow, name string) int {
	for i, m := range list {
		if m.Name == name {
			return i
		}
	}
	return -1
}

func slicesDeleteName(list []projections.ModuleRow, name string) []projections.ModuleRow {
	if i := indexOfName(list, name); i >= 0 {
		return append(list[:i:i], list[i+1:]...)
	}
	return list
}

// moduleAction runs the form's register or delete and redirects; on failure it returns the
// form to show again.
func (c *Console) moduleAction(q *request) (moduleForm, error) {
	f := formOf(q.r)
	switch q.r.PostForm.Get("action") {
	case "register":
		cmd, err := f.command(q, q.r.PostForm.Get("secret"))
		if err != nil {
			return f, err
		}
		if _, err := c.cmds.Modules.Register(q.acting(), cmd); err != nil {
			return f, err
		}
		redirectTo(q, "/modules", url.Values{"registered": {f.Name}})
		return f, nil
	case "delete":
		name := q.r.PostForm.Get("name")
		if err := c.cmds.Modules.Delete(q.acting(), q.ws.ID, name); err != nil {
			return moduleForm{Type: execution.TransportWorker}, err
		}
		redirectTo(q, "/modules", url.Values{"deleted": {name}})
		return f, nil
	}
	return f, domain.Invalid("action", "must be register or delete")
}

// moduleEdit shows one module's settings and saves a change (post, redirect).
func (c *Console) moduleEdit(q *request) {
	name := mux.Vars(q.r)["name"]
	m, err := c.cmds.Modules.Get(q.ctx(), q.ws.ID, name)
	if err != nil {
		c.fail(q, err)
		return
	}
	f := formFromModule(m)
	notice, errText, status := "", "", http.StatusOK
	if q.r.Method == http.MethodPost {
		f = formOf(q.r)
		f.Name, f.Signed, f.Version = name, m.Signed(), m.Version
		cmd, err := f.command(q, q.r.PostForm.Get("secret"))
		if err == nil {
			_, err = c.cmds.Modules.Update(q.acting(), cmd)
		}
		if err == nil {
			redirectTo(q, "/modules/"+url.PathEscape(name), url.Values{"saved": {"1"}})
			return
		}
		status, _, errText = words(err, q.ws.Role)
	} else if q.r.URL.Query().Get("saved") != "" {
		notice = "Saved: new submits use these settings; tasks already sent keep theirs."
	}
	f.Owner = q.ws.Role == workspace.RoleOwner
	c.renderView(q, status, "module", "Module "+name, f, notice, errText)
}

// formOf reads the posted form.
func formOf(r *http.Request) moduleForm {
	v := r.PostForm
	return moduleForm{Name: strings.TrimSpace(v.Get("name")), Description: v.Get("description"),
		InputSchema: v.Get("input_schema"), ConfigSchema: v.Get("config_schema"), OutputSchema: v.Get("output_schema"),
		Price: v.Get("price"), TimeoutMs: v.Get("timeout_ms"), Concurrency: v.Get("concurrency"),
		Type: v.Get("transport"), URL: strings.TrimSpace(v.Get("url")),
		Cacheable: v.Get("cacheable") != "", AllowPrivate: v.Get("allow_private") != ""}
}

func formFromModule(m module.Module) moduleForm {
	f := moduleForm{Name: m.Name, Description: m.Description, InputSchema: string(m.InputSchema), ConfigSchema: string(m.ConfigSchema),
		OutputSchema: string(m.OutputSchema), Price: m.Price.String(), TimeoutMs: strconv.FormatInt(m.TimeoutMs, 10),
		Type: m.Transport.Type, URL: m.Transport.URL, Cacheable: m.Cacheable, AllowPrivate: m.Transport.AllowPrivate,
		Signed: m.Signed(), Version: m.Version}
	if m.Concurrency > 0 {
		f.Concurrency = strconv.Itoa(m.Concurrency)
	}
	return f
}

// command turns the form into the command's input; the numbers and schemas are parsed here,
// with errors naming the field as the API's do.
func (f moduleForm) command(q *request, secret string) (commands.RegisterModule, error) {
	c := commands.RegisterModule{WorkspaceID: q.ws.ID, Name: f.Name, Description: f.Description, Cacheable: f.Cacheable,
		Transport: commands.ModuleTransport{Type: f.Type, Secret: secret, AllowPrivate: f.AllowPrivate}, By: q.rights}
	if f.Type == execution.TransportHTTP {
		c.Transport.URL = f.URL
	}
	var err error
	for _, s := range []struct {
		field, text string
		into        *json.RawMessage
	}{{"inputSchema", f.InputSchema, &c.InputSchema}, {"configSchema", f.ConfigSchema, &c.ConfigSchema}, {"outputSchema", f.OutputSchema, &c.OutputSchema}} {
		if text := strings.TrimSpace(s.text); text != "" {
			if !json.Valid([]byte(text)) {
				return c, domain.Invalid(s.field, "must be a JSON Schema (valid JSON)")
			}
			*s.into = json.RawMessage(text)
		}
	}
	if strings.TrimSpace(f.Price) != "" {
		p, err := module.ParsePrice(f.Price)
		if err != nil {
			return c, err
		}
		c.Price = &p
	}
	if c.TimeoutMs, err = formInt("timeoutMs", f.TimeoutMs); err != nil {
		return c, err
	}
	if c.TimeoutMs == 0 && strings.TrimSpace(f.TimeoutMs) != "" {
		return c, domain.Invalid("timeoutMs", "must be from %d to %d", module.MinTimeoutMs, module.MaxTimeoutMs)
	}
	n, err := formInt("concurrency", f.Concurrency)
	c.Concurrency = int(n)
	return c, err
}

func formInt(field, text string) (int64, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, domain.Invalid(field, "must be a whole number")
	}
	return n, nil
}
