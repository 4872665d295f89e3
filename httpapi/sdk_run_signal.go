package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
)

// SignalRequest is the body of POST /v1/sdk/workflows/executions/{runId}/signals, as the edge
// reads it; the signal_run tool and the CLI read theirs into it too.
type SignalRequest struct {
	Name    *string         `json:"name"`
	Payload json.RawMessage `json:"payload"`
	ID      *string         `json:"id"`
}

// ParseSignal turns a signal's body into the command (without the workspace and run), naming
// the field of a missing or malformed value; the command checks the name and payload.
func ParseSignal(body SignalRequest) (commands.SignalRun, error) {
	var c commands.SignalRun
	if body.Name == nil {
		return c, domain.Invalid("name", "is required: the name of the signal the stage waits for")
	}
	c.Name, c.Payload = *body.Name, body.Payload
	if body.ID != nil {
		if *body.ID == "" {
			return c, domain.Invalid("id", "must not be empty (leave it out for a new id)")
		}
		c.ID = *body.ID
	}
	return c, nil
}

// signal sends a signal to a run: the stages waiting for its name complete with its payload,
// or the run keeps it for the first that will wait (docs/workflows.md "Waits, signals and
// approvals").
func (s *SDKWorkflows) signal(w http.ResponseWriter, r *http.Request) {
	var body SignalRequest
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	c, err := ParseSignal(body)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	st, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	c.WorkspaceID, c.RunID = st.WorkspaceID, st.ID
	res, err := s.Cmds.Waits.Signal(r.Context(), c)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, res)
}
