package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/workflow"
)

// MaxHookBodyBytes bounds the body of a delivery to a hook: larger is 413, whatever the
// server's own bound.
const MaxHookBodyBytes = 1 << 20

// HooksConfig configures the inbound webhook endpoint, POST /hooks/{token}.
type HooksConfig struct {
	// Cmds receives the deliveries. Required.
	Cmds *commands.Commands
	// RatePerSecond and Burst size each hook's token bucket (in this process). Defaults 10
	// and 50: a SaaS redelivering a backlog is let through in bursts, a flood is not.
	RatePerSecond float64
	Burst         int
	// Now is the clock of the rate limit; default time.Now.
	Now func() time.Time
}

// setDefaults fills zero values.
func (c *HooksConfig) setDefaults() {
	if c.RatePerSecond <= 0 {
		c.RatePerSecond = 10
	}
	if c.Burst <= 0 {
		c.Burst = 50
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a missing dependency or a field out of range, by name.
func (c HooksConfig) Validate() error {
	switch {
	case c.Cmds == nil:
		return errors.New("httpapi: HooksConfig.Cmds is required")
	case c.RatePerSecond < 0:
		return fmt.Errorf("httpapi: HooksConfig.RatePerSecond %v: must not be negative", c.RatePerSecond)
	case c.Burst < 0:
		return fmt.Errorf("httpapi: HooksConfig.Burst %d: must not be negative", c.Burst)
	}
	return nil
}

// Hooks serves POST /hooks/{token}: deliveries from a SaaS to a workflow's ON_WEBHOOK
// component, authenticated by the token in the URL and the signature in the component's scheme
// (no session, no API key). docs/workflows.md "Inbound webhooks".
type Hooks struct {
	opts    HooksConfig
	limiter *limiter
}

// NewHooks returns the endpoint, its config defaulted.
func NewHooks(opts HooksConfig) (*Hooks, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	return &Hooks{opts: opts, limiter: newLimiter(opts.RatePerSecond, opts.Burst, maxLimitedKeys)}, nil
}

// Mount adds the endpoint at the root of r (no /v1: the URL is handed to a SaaS, which posts
// to it as is).
func (h *Hooks) Mount(r *mux.Router) {
	r.HandleFunc("/hooks/{token}", h.receive).Methods(http.MethodPost)
}

func (h *Hooks) receive(w http.ResponseWriter, r *http.Request) {
	token := mux.Vars(r)["token"]
	key, ok := commands.HookKey(token)
	if !ok {
		key = "" // every malformed token shares one bucket: no new bucket per guess
	}
	if !answerLimit(w, h.limiter.take("hook:"+key, 1, h.opts.Now())) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxHookBodyBytes))
	if err != nil {
		writeBodyError(w, err)
		return
	}
	receipt, err := h.opts.Cmds.Hooks.ReceiveHook(r.Context(), commands.HookDelivery{Token: token, Header: r.Header.Get, Body: body})
	switch {
	case errors.Is(err, commands.ErrHookSignature):
		// The reason (missing, stale, not matching) helps whoever wires the sender; it says
		// nothing of the secret.
		WriteError(w, http.StatusUnauthorized, strings.TrimPrefix(err.Error(), commands.ErrHookSignature.Error()+": "))
	case errors.Is(err, domain.ErrNotFound):
		WriteError(w, http.StatusNotFound, "hook not found")
	case err != nil:
		WriteDomainError(w, r, err)
	default:
		WriteJSON(w, http.StatusAccepted, receipt)
	}
}

// mountHooks adds the hooks of a workflow's ON_WEBHOOK components to the workspace routes:
// listing them needs workspace:read, rotating workspace:admin.
func (s *Workspaces) mountHooks(r *mux.Router) {
	r.Handle("/workflows/{workflowId}/hooks", s.with(access.ScopeWorkspaceRead, s.listHooks)).Methods(http.MethodGet)
	r.Handle("/workflows/{workflowId}/hooks/{componentId}/rotate", s.with(access.ScopeWorkspaceAdmin, s.rotateHook)).Methods(http.MethodPost)
}

func (s *Workspaces) listHooks(w http.ResponseWriter, r *http.Request, ws string) {
	hooks, err := s.Cmds.Hooks.ListHooks(r.Context(), ws, mux.Vars(r)["workflowId"])
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hooks": hooks})
}

// hookRotation is the optional body of a rotation.
type hookRotation struct {
	// Secret is the sender's own secret, when it draws one; omitted, the service draws it.
	Secret string `json:"secret"`
}

func (s *Workspaces) rotateHook(w http.ResponseWriter, r *http.Request, ws string) {
	var body hookRotation
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	vars := mux.Vars(r)
	issued, err := s.Cmds.Hooks.RotateHook(withActor(r), commands.RotateHook{WorkspaceID: ws, WorkflowID: vars["workflowId"],
		ComponentID: vars["componentId"], Secret: body.Secret})
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusOK, issued)
}

// savedWorkflow is a saved workflow with the hooks the save issued: their tokens and secrets
// appear here once and never again.
type savedWorkflow struct {
	workflow.View
	Hooks []commands.IssuedHook `json:"hooks,omitempty"`
}
