package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/module"
	"github.com/switchyard/switchyard/projections"
)

// mountModules adds the workspace module endpoints (issue 28, docs/modules.md): a module runs
// the workspace's own code and bills its calls, so every one of them needs workspace:admin.
func (s *Workspaces) mountModules(r *mux.Router) {
	r.Handle("/modules", s.withRights(access.ScopeWorkspaceAdmin, s.registerModule)).Methods(http.MethodPost)
	r.Handle("/modules", s.with(access.ScopeWorkspaceAdmin, s.listModules)).Methods(http.MethodGet)
	r.Handle("/modules/{name}", s.with(access.ScopeWorkspaceAdmin, s.getModule)).Methods(http.MethodGet)
	r.Handle("/modules/{name}", s.withRights(access.ScopeWorkspaceAdmin, s.updateModule)).Methods(http.MethodPut)
	r.Handle("/modules/{name}", s.with(access.ScopeWorkspaceAdmin, s.deleteModule)).Methods(http.MethodDelete)
}

// ModuleBody is the body of registering (POST) or replacing (PUT) a module.
type ModuleBody struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	ConfigSchema json.RawMessage `json:"configSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	TimeoutMs    *int64          `json:"timeoutMs"`
	Price        *json.Number    `json:"price"`
	Cacheable    bool            `json:"cacheable"`
	Concurrency  int             `json:"concurrency"`
	Transport    *struct {
		Type         string `json:"type"`
		URL          string `json:"url"`
		Secret       string `json:"secret"`
		AllowPrivate bool   `json:"allowPrivate"`
	} `json:"transport"`
}

// Command turns the body into the command's input for workspace ws, checking what only the
// edge sees: an explicit timeoutMs of 0, a price's decimals, a missing transport.
func (b ModuleBody) Command(ws string) (commands.RegisterModule, error) {
	c := commands.RegisterModule{WorkspaceID: ws, Name: b.Name, Description: b.Description,
		InputSchema: absentIfNull(b.InputSchema), ConfigSchema: absentIfNull(b.ConfigSchema), OutputSchema: absentIfNull(b.OutputSchema),
		Cacheable: b.Cacheable, Concurrency: b.Concurrency}
	if b.TimeoutMs != nil {
		if *b.TimeoutMs == 0 {
			return c, domain.Invalid("timeoutMs", "must be from %d to %d", module.MinTimeoutMs, module.MaxTimeoutMs)
		}
		c.TimeoutMs = *b.TimeoutMs
	}
	if b.Price != nil {
		p, err := module.ParsePrice(b.Price.String())
		if err != nil {
			return c, err
		}
		c.Price = &p
	}
	if b.Transport == nil {
		return c, domain.Invalid("transport", `is required: {"type": "worker"} or {"type": "http", "url": ..., "secret": ...}`)
	}
	c.Transport = commands.ModuleTransport{Type: b.Transport.Type, URL: b.Transport.URL, Secret: b.Transport.Secret,
		AllowPrivate: b.Transport.AllowPrivate}
	return c, nil
}

// absentIfNull reads a JSON null schema as no schema.
func absentIfNull(doc json.RawMessage) json.RawMessage {
	if string(doc) == "null" {
		return nil
	}
	return doc
}

func (s *Workspaces) registerModule(w http.ResponseWriter, r *http.Request, ws string, rights access.Rights) {
	var body ModuleBody
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	c, err := body.Command(ws)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	c.By = rights
	m, err := s.Cmds.Modules.Register(withActor(r), c)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusCreated, projections.ModuleView(m))
}

func (s *Workspaces) updateModule(w http.ResponseWriter, r *http.Request, ws string, rights access.Rights) {
	name := mux.Vars(r)["name"]
	var body ModuleBody
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	if body.Name != "" && body.Name != name {
		WriteError(w, http.StatusBadRequest, "name: a module cannot be renamed; register the new name and delete this one")
		return
	}
	body.Name = name
	c, err := body.Command(ws)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	c.By = rights
	m, err := s.Cmds.Modules.Update(withActor(r), c)
	if err != nil {
		writeModuleError(w, r, name, err)
		return
	}
	WriteJSON(w, http.StatusOK, projections.ModuleView(m))
}

func (s *Workspaces) listModules(w http.ResponseWriter, r *http.Request, ws string) {
	ServePage(w, r, func(ctx context.Context, p projections.Page) ([]projections.ModuleRow, int, error) {
		return s.Queries.ModulesOf(ctx, ws, p)
	})
}

func (s *Workspaces) getModule(w http.ResponseWriter, r *http.Request, ws string) {
	name := mux.Vars(r)["name"]
	// Folded from the module's stream: a module is visible as soon as it is acknowledged.
	m, err := s.Cmds.Modules.Get(r.Context(), ws, name)
	if err != nil {
		writeModuleError(w, r, name, err)
		return
	}
	WriteJSON(w, http.StatusOK, projections.ModuleView(m))
}

func (s *Workspaces) deleteModule(w http.ResponseWriter, r *http.Request, ws string) {
	name := mux.Vars(r)["name"]
	if err := s.Cmds.Modules.Delete(withActor(r), ws, name); err != nil {
		writeModuleError(w, r, name, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeModuleError names the module of a 404.
func writeModuleError(w http.ResponseWriter, r *http.Request, name string, err error) {
	if errors.Is(err, module.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "module "+name+" not found")
		return
	}
	WriteDomainError(w, r, err)
}

// DecodeModuleBody reads a module's settings as the endpoints take them (for the CLI's
// --file), refusing unknown fields so a typo is an error rather than a silently ignored
// setting.
func DecodeModuleBody(body []byte) (ModuleBody, error) {
	var b ModuleBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return b, &badBody{jsonProblem(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return b, &badBody{"must be a single JSON object, with nothing after it"}
	}
	if err := domain.CheckJSONBody("body", body); err != nil {
		return b, err
	}
	return b, nil
}
