package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/projections"
)

// SDKEvents serves POST /v1/sdk/events (docs/workflows.md, "Events"): an event from the
// workspace's own systems starts a run of every workflow whose ON_EVENT trigger listens for it.
// Any key of the workspace may send one; a key scoped to some workflows (allowedWorkflowIds)
// starts runs of those only, and is answered those only.
type SDKEvents struct {
	Cmds    *commands.Commands
	Queries *projections.Queries
	Auth    *SDKAuth
}

// EventRequest is the body of POST /v1/sdk/events, as the edge reads it.
type EventRequest struct {
	Name    *string         `json:"name"`
	Payload json.RawMessage `json:"payload"`
	ID      *string         `json:"id"`
}

// Mount adds the route to the /v1 router.
func (s *SDKEvents) Mount(v1 *mux.Router) {
	v1.Handle("/sdk/events", s.Auth.Route(1, http.HandlerFunc(s.send))).Methods(http.MethodPost)
}

// ParseEvent turns an event's body into the command (without the workspace, key and index),
// naming the field of a missing or malformed value.
func ParseEvent(body EventRequest) (commands.SendEvent, error) {
	var c commands.SendEvent
	if body.Name == nil {
		return c, domain.Invalid("name", "is required: the event's name, as ON_EVENT components' config.name gives it")
	}
	c.Name = *body.Name
	if body.ID != nil {
		c.ID = *body.ID
	}
	c.Payload = body.Payload
	if len(c.Payload) == 0 || string(c.Payload) == "null" {
		c.Payload = json.RawMessage(`{}`)
	}
	return c, nil
}

func (s *SDKEvents) send(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	var body EventRequest
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	c, err := ParseEvent(body)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	c.WorkspaceID, c.APIKeyID, c.AllowedWorkflowIDs, c.Triggers = caller.WorkspaceID, caller.KeyID, caller.AllowedWorkflowIDs, s.Queries
	out, err := s.Cmds.Events.SendEvent(r.Context(), c)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, out)
}
