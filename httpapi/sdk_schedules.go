package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
)

// Schedules is the answer of GET /v1/sdk/workflows/{workflowId}/schedules.
type Schedules struct {
	WorkflowID string                  `json:"workflowId"`
	Schedules  []commands.ScheduleView `json:"schedules"`
}

// mountSchedules adds the routes of a workflow's ON_SCHEDULE components (docs/workflows.md,
// "Schedules").
func (s *SDKWorkflows) mountSchedules(v1 *mux.Router) {
	v1.Handle("/sdk/workflows/{workflowId}/schedules", s.Auth.Route(1, http.HandlerFunc(s.schedules))).Methods(http.MethodGet)
	v1.Handle("/sdk/workflows/{workflowId}/schedules/{componentId}/pause", s.Auth.Route(1, http.HandlerFunc(s.pauseSchedule))).Methods(http.MethodPost)
	v1.Handle("/sdk/workflows/{workflowId}/schedules/{componentId}/resume", s.Auth.Route(1, http.HandlerFunc(s.resumeSchedule))).Methods(http.MethodPost)
	v1.Handle("/sdk/workflows/{workflowId}/schedules/{componentId}/trigger", s.Auth.Route(1, http.HandlerFunc(s.triggerSchedule))).Methods(http.MethodPost)
}

func (s *SDKWorkflows) schedules(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["workflowId"]
	if !allowed(w, caller, id) {
		return
	}
	views, err := s.Cmds.Schedules.Schedules(r.Context(), caller.WorkspaceID, id)
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "workflow "+id+" not found")
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, Schedules{WorkflowID: id, Schedules: views})
}

func (s *SDKWorkflows) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.changeSchedule(w, r, s.Cmds.Schedules.PauseSchedule)
}

func (s *SDKWorkflows) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	s.changeSchedule(w, r, s.Cmds.Schedules.ResumeSchedule)
}

// scheduleTarget checks the route's workflow against the key and answers 404 for a missing
// schedule; ok reports whether the handler goes on.
func scheduleTarget(w http.ResponseWriter, r *http.Request, err error) bool {
	vars := mux.Vars(r)
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "workflow "+vars["workflowId"]+" or its schedule component "+vars["componentId"]+" not found")
		return false
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return false
	}
	return true
}

func (s *SDKWorkflows) changeSchedule(w http.ResponseWriter, r *http.Request,
	change func(ctx context.Context, workspaceID, workflowID, componentID string) (commands.ScheduleView, error)) {
	caller, _ := CallerFrom(r.Context())
	vars := mux.Vars(r)
	if !allowed(w, caller, vars["workflowId"]) || !decodeOptionalBody(w, r, &struct{}{}) {
		return
	}
	v, err := change(r.Context(), caller.WorkspaceID, vars["workflowId"], vars["componentId"])
	if scheduleTarget(w, r, err) {
		WriteJSON(w, http.StatusOK, v)
	}
}

func (s *SDKWorkflows) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	vars := mux.Vars(r)
	if !allowed(w, caller, vars["workflowId"]) || !decodeOptionalBody(w, r, &struct{}{}) {
		return
	}
	started, err := s.Cmds.Schedules.TriggerSchedule(r.Context(), caller.WorkspaceID, vars["workflowId"], vars["componentId"], caller.KeyID)
	if scheduleTarget(w, r, err) {
		WriteJSON(w, http.StatusOK, started)
	}
}
