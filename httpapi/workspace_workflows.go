package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/workflow"
)

// mountWorkflows adds workflow CRUD to the workspace routes: reads need workspace:read,
// writes workspace:admin (docs/workflows.md).
func (s *Workspaces) mountWorkflows(r *mux.Router) {
	r.Handle("/workflows", s.with(access.ScopeWorkspaceAdmin, s.createWorkflow)).Methods(http.MethodPost)
	r.Handle("/workflows/{workflowId}", s.with(access.ScopeWorkspaceRead, s.getWorkflow)).Methods(http.MethodGet)
	r.Handle("/workflows/{workflowId}", s.with(access.ScopeWorkspaceAdmin, s.updateWorkflow)).Methods(http.MethodPut)
	r.Handle("/workflows/{workflowId}", s.with(access.ScopeWorkspaceAdmin, s.deleteWorkflow)).Methods(http.MethodDelete)
}

// DecodeDefinition reads a workflow definition, refusing unknown fields so a typo is a 400
// rather than a silently ignored setting.
func DecodeDefinition(body []byte) (workflow.Definition, error) {
	var d workflow.Definition
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, &badBody{locateProblem(body, err)}
	}
	// Decode stops after the first value: "{...} {...}" or "{...}x" must not pass as the first.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return d, &badBody{"must be a single JSON object, with nothing after it"}
	}
	if err := domain.CheckJSONBody("body", body); err != nil {
		return d, &badBody{err.Error()}
	}
	return d, nil
}

// locateProblem names the component or edge a decoding error is in ("components[2]:
// attempts: must be a number, not string"): decoded whole, the error would not say which.
func locateProblem(body []byte, err error) string {
	var parts struct {
		Components []json.RawMessage `json:"components"`
		Edges      []json.RawMessage `json:"edges"`
	}
	if json.Unmarshal(body, &parts) == nil {
		if msg := firstProblem("components", parts.Components, &workflow.Component{}); msg != "" {
			return msg
		}
		if msg := firstProblem("edges", parts.Edges, &workflow.Edge{}); msg != "" {
			return msg
		}
	}
	return jsonProblem(err)
}

func firstProblem[T any](field string, items []json.RawMessage, into *T) string {
	for i, raw := range items {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			return fmt.Sprintf("%s[%d]: %s", field, i, jsonProblem(err))
		}
	}
	return ""
}

type badBody struct{ msg string }

func (b *badBody) Error() string { return b.msg }

func (s *Workspaces) readDefinition(w http.ResponseWriter, r *http.Request) (workflow.Definition, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeBodyError(w, err)
		return workflow.Definition{}, false
	}
	d, err := DecodeDefinition(body)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "body: "+err.Error())
		return d, false
	}
	return d, true
}

func (s *Workspaces) createWorkflow(w http.ResponseWriter, r *http.Request, ws string) {
	d, ok := s.readDefinition(w, r)
	if !ok {
		return
	}
	st, err := s.Cmds.Workflows.CreateWorkflow(withActor(r), commands.CreateWorkflow{WorkspaceID: ws, Definition: d})
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/workspaces/"+ws+"/workflows/"+st.ID)
	s.writeSaved(w, r, http.StatusCreated, st)
}

func (s *Workspaces) getWorkflow(w http.ResponseWriter, r *http.Request, ws string) {
	st, err := s.Cmds.Workflows.Workflow(r.Context(), ws, mux.Vars(r)["workflowId"])
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, st.View())
}

func (s *Workspaces) updateWorkflow(w http.ResponseWriter, r *http.Request, ws string) {
	d, ok := s.readDefinition(w, r)
	if !ok {
		return
	}
	st, err := s.Cmds.Workflows.UpdateWorkflow(withActor(r), ws, mux.Vars(r)["workflowId"], d)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	s.writeSaved(w, r, http.StatusOK, st)
}

// writeSaved answers a save with the workflow and the hooks the save issued to its new
// ON_WEBHOOK components, whose tokens and secrets are shown this once. A save whose hooks
// could not be issued is still saved: the answer says so, and rotating the hook issues it.
func (s *Workspaces) writeSaved(w http.ResponseWriter, r *http.Request, status int, st workflow.State) {
	issued, err := s.Cmds.Hooks.IssueHooks(withActor(r), st.WorkspaceID, st.ID)
	if err != nil {
		WriteDomainError(w, r, fmt.Errorf("workflow %s saved, its hooks not issued (rotate them to issue): %w", st.ID, err))
		return
	}
	if len(issued) > 0 {
		w.Header().Set("Cache-Control", "no-store")
	}
	WriteJSON(w, status, savedWorkflow{View: st.View(), Hooks: issued})
}

func (s *Workspaces) deleteWorkflow(w http.ResponseWriter, r *http.Request, ws string) {
	if err := s.Cmds.Workflows.DeleteWorkflow(withActor(r), ws, mux.Vars(r)["workflowId"]); err != nil {
		WriteDomainError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// withActor records who made a change (the user behind the bearer, through which app) in the
// metadata of the events it appends.
func withActor(r *http.Request) context.Context {
	ctx := r.Context()
	if p, ok := PrincipalFrom(ctx); ok {
		source := "workspace-api:" + p.ClientID
		if p.Session {
			source = "dashboard"
		}
		ctx = commands.WithMetadata(ctx, commands.Metadata{Actor: p.UserID, Source: source})
	}
	return ctx
}
