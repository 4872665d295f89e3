package httpapi

import (
	"errors"
	"net/http"

	"github.com/switchyard/switchyard/domain/runnotify"
)

// replayNotify re-delivers a finished run's workflow.run.terminal webhook to its definition's
// notify, as SPEC.md 4.4 does an execution's callback, and answers the run detail. While a
// round is still open it queues nothing more.
func (s *SDKWorkflows) replayNotify(w http.ResponseWriter, r *http.Request) {
	st, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	after, err := s.Cmds.Webhooks.ReplayRunNotify(r.Context(), st.ID)
	switch {
	case errors.Is(err, runnotify.ErrNotFinished):
		WriteError(w, http.StatusConflict, "run "+st.ID+" has not finished; its webhook is delivered when it does")
	case errors.Is(err, runnotify.ErrNoNotify):
		WriteError(w, http.StatusConflict, "run "+st.ID+" has no notify in its definition")
	case err != nil:
		WriteDomainError(w, r, err)
	default:
		WriteJSON(w, http.StatusOK, after.Run.Detail())
	}
}
