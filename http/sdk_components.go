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
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/seal"
)

// submitCost is the rate-limit cost of a submit: SPEC.md 4.1's 2x multiplier.
const submitCost = 2

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// SDKComponents serves SPEC.md 4.1 to 4.4 and the module listing.
type SDKComponents struct {
	Cmds     *commands.Handler
	Registry *modules.Registry
	Hub      *livehub.Hub
	Sealer   *seal.Sealer
	Auth     *SDKAuth
	// CacheWindow is SWITCHYARD_CACHE_WINDOW: how long identical calls are free after the first.
	CacheWindow time.Duration
	// Heartbeat is SWITCHYARD_SSE_HEARTBEAT: the interval of :ping comments on streams (15s).
	Heartbeat time.Duration
}

// Mount adds the routes to the /v1 router.
func (s *SDKComponents) Mount(v1 *mux.Router) {
	v1.Handle("/sdk/components", s.Auth.Route(submitCost, http.HandlerFunc(s.submit))).Methods(http.MethodPost)
	v1.Handle("/sdk/components/executions/{executionId}", s.Auth.Route(1, http.HandlerFunc(s.get))).Methods(http.MethodGet)
	v1.Handle("/sdk/modules", s.Auth.Route(1, http.HandlerFunc(s.listModules))).Methods(http.MethodGet)
	v1.Handle("/sdk/components/executions/{executionId}/stream", s.Auth.Route(1, http.HandlerFunc(s.stream))).Methods(http.MethodGet)
	v1.Handle("/sdk/components/executions/{executionId}/replay-callback", s.Auth.Route(1, http.HandlerFunc(s.replayCallback))).Methods(http.MethodPost)
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
	cmd, err := s.command(req, caller)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	sum := sha256.Sum256(body)
	cmd.IdempotencyKey, cmd.BodyHash = key, hex.EncodeToString(sum[:])
	st, err := s.Cmds.SubmitExecution(r.Context(), cmd)
	if errors.Is(err, execution.ErrIdempotencyKeyReused) {
		WriteError(w, http.StatusConflict, "Idempotency-Key was already used with a different request body")
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	if req.WaitForMs > 0 && !st.Status.Terminal() {
		st = s.wait(r.Context(), st, time.Duration(req.WaitForMs)*time.Millisecond)
	}
	WriteJSON(w, http.StatusOK, st.Record())
}

// command checks the module, config and input, and seals the callback's secrets.
func (s *SDKComponents) command(req submitRequest, caller Caller) (commands.SubmitExecution, error) {
	if err := s.Registry.Validate(req.Module, req.Config, req.Input); err != nil {
		var ve *modules.ValidationError
		if errors.As(err, &ve) {
			return commands.SubmitExecution{}, domain.Invalid(ve.Field, "%s", ve.Message)
		}
		return commands.SubmitExecution{}, err
	}
	m, _ := s.Registry.Get(req.Module)
	cb, err := sealCallback(s.Sealer, req)
	if err != nil {
		return commands.SubmitExecution{}, err
	}
	return commands.SubmitExecution{WorkspaceID: caller.WorkspaceID, APIKeyID: caller.KeyID, Module: req.Module,
		Input: req.Input, Config: req.Config, Attempts: req.Attempts, CostMilli: m.CostMilli(), Callback: cb,
		CacheWindow: s.CacheWindow}, nil
}

// wait answers waitForMs from the live hub: it returns when the execution ends or the wait
// does, with the state at that moment.
func (s *SDKComponents) wait(ctx context.Context, st execution.State, d time.Duration) execution.State {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_ = s.Hub.Until(ctx, commands.ExecutionStream(st.ID), time.Second, func() (bool, error) {
		cur, err := s.Cmds.Execution(ctx, st.ID)
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
	st, err := s.Cmds.Execution(r.Context(), id)
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
	all := s.Registry.List()
	WritePage(w, PageOf(all, p), len(all), p)
}

func writeBodyError(w http.ResponseWriter, err error) {
	if IsBodyTooLarge(err) {
		WriteError(w, http.StatusRequestEntityTooLarge, "request body exceeds the limit")
		return
	}
	WriteError(w, http.StatusBadRequest, "request body could not be read")
}
