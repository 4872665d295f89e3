package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/switchyard/switchyard/commands"
)

// rerun starts a new run of an ended run's definition, copying the stages completed upstream
// of the restart point (docs/workflows.md, "Re-running a run").
func (s *SDKWorkflows) rerun(w http.ResponseWriter, r *http.Request) {
	var body struct {
		FromStage *string         `json:"fromStage"`
		Input     json.RawMessage `json:"input"`
		Iteration *int            `json:"iteration"`
	}
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	if len(body.Input) > 0 && string(body.Input) != "null" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(body.Input, &obj) != nil || obj == nil {
			WriteError(w, http.StatusBadRequest, "input: must be a JSON object (the trigger's input)")
			return
		}
	} else {
		body.Input = nil
	}
	st, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	caller, _ := CallerFrom(r.Context())
	c := commands.RerunRun{RunID: st.ID, APIKeyID: caller.KeyID, Input: body.Input, Iteration: body.Iteration}
	if body.FromStage != nil {
		c.FromStage = *body.FromStage
	}
	out, err := s.Cmds.Workflows.RerunRun(r.Context(), c)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, out)
}
