package httpapi

import (
	"errors"
	"net/http"

	"github.com/switchyard/switchyard/domain/execution"
)

// replayCallback serves SPEC.md 4.4: it opens a new delivery round of the terminal webhook and
// answers the execution record. While a round is still open it queues nothing more.
func (s *SDKComponents) replayCallback(w http.ResponseWriter, r *http.Request) {
	st, ok := s.load(w, r)
	if !ok {
		return
	}
	after, err := s.Cmds.Webhooks.ReplayWebhook(r.Context(), st.ID)
	switch {
	case errors.Is(err, execution.ErrNotFinished):
		WriteError(w, http.StatusConflict, "execution "+st.ID+" has not finished; its webhook is delivered when it does")
	case errors.Is(err, execution.ErrNoCallback):
		WriteError(w, http.StatusConflict, "execution "+st.ID+" has no callbackUrl")
	case err != nil:
		WriteDomainError(w, r, err)
	default:
		WriteJSON(w, http.StatusOK, after.Record())
	}
}
