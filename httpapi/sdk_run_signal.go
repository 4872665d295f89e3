package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/switchyard/switchyard/commands"
)

// signal sends a signal to a run: the stages waiting for its name complete with its payload,
// or the run keeps it for the first that will wait (docs/workflows.md "Waits, signals and
// approvals").
func (s *SDKWorkflows) signal(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name    *string         `json:"name"`
		Payload json.RawMessage `json:"payload"`
		ID      *string         `json:"id"`
	}
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	if body.Name == nil {
		WriteError(w, http.StatusBadRequest, "name: is required: the name of the signal the stage waits for")
		return
	}
	st, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	c := commands.SignalRun{WorkspaceID: st.WorkspaceID, RunID: st.ID, Name: *body.Name, Payload: body.Payload}
	if body.ID != nil {
		if *body.ID == "" {
			WriteError(w, http.StatusBadRequest, "id: must not be empty (leave it out for a new id)")
			return
		}
		c.ID = *body.ID
	}
	res, err := s.Cmds.Waits.Signal(r.Context(), c)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, res)
}
