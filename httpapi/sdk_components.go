package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/livehub"
)

// submitCost is the rate-limit cost of a submit: SPEC.md 4.1's 2x multiplier.
const submitCost = 2

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// SDKComponents serves SPEC.md 4.1 to 4.4 and the module listing.
type SDKComponents struct {
	Cmds     *commands.Commands
	Registry *modules.Registry
	// Queries lists the workspace's own modules after the built-ins.
	Queries *projections.Queries
	Hub     *livehub.Hub
	Auth    *SDKAuth
	// CacheWindow is SWITCHYARD_CACHE_WINDOW: how long identical calls are free after the first.
	CacheWindow time.Duration
	// Heartbeat is SWITCHYARD_SSE_HEARTBEAT: the interval of :ping comments on streams (15s).
	Heartbeat time.Duration
	// InPlaceFor is how long an HTTP/1 stream is served in place before its connection is
	// taken over; 0, the default, takes it over at once (see serveSSE).
	InPlaceFor time.Duration
}

// Mount adds the routes to the /v1 router.
func (s *SDKComponents) Mount(v1 *mux.Router) {
	v1.Handle("/sdk/components", s.Auth.Route(submitCost, http.HandlerFunc(s.submit), UnscopedOnly, ClaimInCommit)).Methods(http.MethodPost)
	v1.Handle("/sdk/components/executions/{executionId}", s.Auth.Route(1, http.HandlerFunc(s.get), ForExecution)).Methods(http.MethodGet)
	v1.Handle("/sdk/modules", s.Auth.Route(1, http.HandlerFunc(s.listModules))).Methods(http.MethodGet)
	v1.Handle("/sdk/components/executions/{executionId}/stream", s.Auth.Route(1, http.HandlerFunc(s.stream), ForExecution, Stream)).Methods(http.MethodGet)
	v1.Handle("/sdk/components/executions/{executionId}/replay-callback", s.Auth.Route(1, http.HandlerFunc(s.replayCallback), ForExecution)).Methods(http.MethodPost)
}

func (s *SDKComponents) submit(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	req, err := parseSubmit(body)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey {
		WriteError(w, http.StatusBadRequest, "Idempotency-Key: must be at most 255 characters")
		return
	}
	start := time.Now()
	cmd := req.command(caller)
	sum := sha256.Sum256(body)
	cmd.IdempotencyKey, cmd.BodyHash, cmd.CacheWindow = key, hex.EncodeToString(sum[:]), s.CacheWindow
	cmd.Claim = requestClaimFrom(r.Context())
	st, err := s.Cmds.Executions.SubmitExecution(r.Context(), cmd)
	if errors.Is(err, execution.ErrIdempotencyKeyReused) {
		WriteError(w, http.StatusConflict, "Idempotency-Key was already used with a different request body")
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, s.waitRest(r.Context(), st, cmd.WaitFor-time.Since(start)).Record())
}

// waitRest waits the rest of a submit's waitForMs for an execution the submit did not see
// end (another instance runs it, or a cached repeat waits for its first call): through the
// live hub, until the execution ends or the wait does; it returns the state at that moment.
func (s *SDKComponents) waitRest(ctx context.Context, st execution.State, d time.Duration) execution.State {
	if d <= 0 || st.Status.Terminal() {
		return st
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_ = s.Hub.Until(ctx, commands.ExecutionStream(st.ID), time.Second, func() (bool, error) {
		cur, err := s.Cmds.Executions.Execution(ctx, st.ID)
		if err != nil {
			return false, err
		}
		st = cur
		return cur.Status.Terminal(), nil
	})
	return st
}

func (s *SDKComponents) get(w http.ResponseWriter, r *http.Request) {
	st, ok := s.load(w, r)
	if ok {
		WriteJSON(w, http.StatusOK, st.Record())
	}
}

// load finds the route's execution; another workspace's answers 404, as an unknown one does.
func (s *SDKComponents) load(w http.ResponseWriter, r *http.Request) (execution.State, bool) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["executionId"]
	st, err := s.Cmds.Executions.Execution(r.Context(), id)
	if err == nil && st.WorkspaceID != caller.WorkspaceID {
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "execution "+id+" not found")
		return st, false
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return st, false
	}
	return st, true
}

func (s *SDKComponents) listModules(w http.ResponseWriter, r *http.Request) {
	p, err := ParsePage(r)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	caller, _ := CallerFrom(r.Context())
	list, total, err := listModules(r.Context(), s.Registry, s.Queries, caller.WorkspaceID, p)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WritePage(w, list, total, p)
}

func writeBodyError(w http.ResponseWriter, err error) {
	if IsBodyTooLarge(err) {
		WriteError(w, http.StatusRequestEntityTooLarge, "request body exceeds the limit")
		return
	}
	WriteError(w, http.StatusBadRequest, "request body could not be read")
}
