package commands

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/itchyny/gojq"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/hook"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
)

var hookAgg = aggregate[hook.State]{evolve: hook.State.Evolve}

// HookStream is the stream of the hook of a workflow's ON_WEBHOOK component.
func HookStream(id string) string { return eventstore.StreamName(hook.Category, id) }

// hookSecretAAD binds a sealed hook secret to its hook: an envelope copied to another hook, or
// to a callback, does not open.
func hookSecretAAD(hookID string) []byte { return []byte("hookSecret:" + hookID) }

// TransformTimeout bounds a hook's jq transform of one delivery.
const TransformTimeout = time.Second

// ErrHookSignature is a delivery whose signature is missing, stale or wrong (hook.ErrSignature):
// refused with 401, nothing recorded.
var ErrHookSignature = hook.ErrSignature

// IssuedHook is a hook's token and secret as issue and rotate return them. Token and Secret are
// in no event in the clear and cannot be recovered: this value is the only place they exist.
type IssuedHook struct {
	ComponentID string `json:"componentId"`
	Scheme      string `json:"scheme"`
	// URL is the path deliveries are posted to, under the service's base URL.
	URL      string    `json:"url"`
	Token    string    `json:"token"`
	Secret   string    `json:"secret"`
	IssuedAt time.Time `json:"issuedAt"`
}

// HookView is a hook without its credentials: what a workspace may read again.
type HookView struct {
	ComponentID string `json:"componentId"`
	Scheme      string `json:"scheme"`
	// Issued is false for a component whose hook has not been issued yet (rotate issues it).
	Issued bool `json:"issued"`
	// URLPrefix is the URL's path without the token's secret part, to recognise it by.
	URLPrefix string     `json:"urlPrefix,omitempty"`
	IssuedAt  *time.Time `json:"issuedAt,omitempty"`
	RotatedAt *time.Time `json:"rotatedAt,omitempty"`
}

// IssueHooks gives each ON_WEBHOOK component of the workflow that has no hook yet its token and
// secret, and returns those it issued: saving a workflow calls it. A hook issued by another
// save at the same moment is left to that save to show.
func (h *Hooks) IssueHooks(ctx context.Context, workspaceID, workflowID string) ([]IssuedHook, error) {
	wf, err := h.workflows.Workflow(ctx, workspaceID, workflowID)
	if err != nil {
		return nil, err
	}
	var issued []IssuedHook
	for _, comp := range wf.Definition.Components {
		if comp.Module != workflow.ModuleOnWebhook {
			continue
		}
		got, err := h.issue(ctx, wf, comp)
		if errors.Is(err, domain.ErrAlreadyExists) {
			continue
		}
		if err != nil {
			return issued, err
		}
		issued = append(issued, got)
	}
	return issued, nil
}

// RotateHook is the input of the rotate-hook command.
type RotateHook struct {
	WorkspaceID string
	WorkflowID  string
	ComponentID string
	// Secret is the new signing secret when the sender draws it (a Standard Webhooks sender
	// hands out "whsec_..."); empty: the service draws one.
	Secret string
}

// RotateHook gives a component's hook a new token and secret, returned once; the old token
// stops working at once. A component whose hook was never issued gets its first.
func (h *Hooks) RotateHook(ctx context.Context, c RotateHook) (IssuedHook, error) {
	wf, err := h.workflows.Workflow(ctx, c.WorkspaceID, c.WorkflowID)
	if err != nil {
		return IssuedHook{}, err
	}
	comp, ok := wf.Component(c.ComponentID)
	if !ok || comp.Module != workflow.ModuleOnWebhook {
		return IssuedHook{}, fmt.Errorf("rotate hook: component %q of workflow %s is not %s: %w", c.ComponentID, c.WorkflowID,
			workflow.ModuleOnWebhook, domain.ErrNotFound)
	}
	cfg, err := workflow.ParseWebhook(comp.Config)
	if err != nil {
		return IssuedHook{}, err
	}
	if c.Secret != "" {
		if err := hook.CheckSecret(cfg.Scheme, c.Secret); err != nil {
			return IssuedHook{}, err
		}
	}
	id := hook.ID(wf.ID, comp.ID)
	token, secret, hash, sealed, err := h.credentials(id, c.Secret)
	if err != nil {
		return IssuedHook{}, err
	}
	var at time.Time
	_, err = execute(ctx, h, HookStream(id), hookAgg, func(s hook.State) ([]domain.Event, error) {
		var evs []domain.Event
		var err error
		if s.Exists {
			evs, err = hook.DecideRotate(s, c.WorkspaceID, hash, sealed, h.now())
		} else {
			evs, err = hook.DecideIssue(s, hook.Issue{WorkspaceID: c.WorkspaceID, WorkflowID: wf.ID, ComponentID: comp.ID,
				Hash: hash, SealedSecret: sealed}, h.now())
		}
		if err == nil {
			at = h.now().UTC()
		}
		return evs, err
	})
	if err != nil {
		return IssuedHook{}, wrap("rotate hook", err)
	}
	return IssuedHook{ComponentID: comp.ID, Scheme: cfg.Scheme, URL: "/hooks/" + token, Token: token, Secret: secret, IssuedAt: at}, nil
}

// ListHooks lists the hooks of the workflow's ON_WEBHOOK components, without their credentials.
func (h *Hooks) ListHooks(ctx context.Context, workspaceID, workflowID string) ([]HookView, error) {
	wf, err := h.workflows.Workflow(ctx, workspaceID, workflowID)
	if err != nil {
		return nil, err
	}
	views := []HookView{}
	for _, comp := range wf.Definition.Components {
		if comp.Module != workflow.ModuleOnWebhook {
			continue
		}
		v := HookView{ComponentID: comp.ID}
		if cfg, err := workflow.ParseWebhook(comp.Config); err == nil {
			v.Scheme = cfg.Scheme
		}
		id := hook.ID(wf.ID, comp.ID)
		l, err := load(ctx, h, HookStream(id), hookAgg)
		if err != nil {
			return nil, err
		}
		if s := l.state; s.Exists && s.WorkspaceID == workspaceID {
			at := s.IssuedAt
			v.Issued, v.URLPrefix, v.IssuedAt, v.RotatedAt = true, "/hooks/"+hook.Prefix+id+"_", &at, s.RotatedAt
		}
		views = append(views, v)
	}
	return views, nil
}

// issue draws and records the first token and secret of comp's hook; a hook issued already is
// domain.ErrAlreadyExists.
func (h *Hooks) issue(ctx context.Context, wf workflow.State, comp workflow.Component) (IssuedHook, error) {
	cfg, err := workflow.ParseWebhook(comp.Config)
	if err != nil {
		return IssuedHook{}, err
	}
	id := hook.ID(wf.ID, comp.ID)
	// Read first, so a save that changes nothing of its hooks draws no secret and seals nothing.
	l, err := load(ctx, h, HookStream(id), hookAgg)
	if err != nil {
		return IssuedHook{}, err
	}
	if l.state.Exists {
		return IssuedHook{}, domain.ErrAlreadyExists
	}
	token, secret, hash, sealed, err := h.credentials(id, "")
	if err != nil {
		return IssuedHook{}, err
	}
	_, err = execute(ctx, h, HookStream(id), hookAgg, func(s hook.State) ([]domain.Event, error) {
		return hook.DecideIssue(s, hook.Issue{WorkspaceID: wf.WorkspaceID, WorkflowID: wf.ID, ComponentID: comp.ID,
			Hash: hash, SealedSecret: sealed}, h.now())
	})
	if err != nil {
		return IssuedHook{}, wrap("issue hook", err)
	}
	return IssuedHook{ComponentID: comp.ID, Scheme: cfg.Scheme, URL: "/hooks/" + token, Token: token, Secret: secret,
		IssuedAt: h.now().UTC()}, nil
}

// credentials draws a token (and a secret, unless given) for hook id and returns them with
// the token's hash and the sealed secret.
func (h *Hooks) credentials(id, secret string) (token, plain, hash, sealed string, err error) {
	if h.sealer == nil {
		return "", "", "", "", errors.New("hook: no sealer configured for its secret")
	}
	random := make([]byte, 2*hook.RandomBytes)
	if _, err := io.ReadFull(rand.Reader, random); err != nil {
		return "", "", "", "", fmt.Errorf("hook: %w", err)
	}
	token = hook.Format(id, random[:hook.RandomBytes])
	plain = secret
	if plain == "" {
		plain = hook.NewSecret(random[hook.RandomBytes:])
	}
	if sealed, err = h.sealer.Seal([]byte(plain), hookSecretAAD(id)); err != nil {
		return "", "", "", "", err
	}
	return token, plain, hook.Hash(token), sealed, nil
}

// HookKey is the name of the hook a token claims to be, for a rate limit per hook; ok is false
// for a string that has no token's shape.
func HookKey(token string) (string, bool) {
	id, err := hook.ParseID(token)
	return id, err == nil
}

// HookDelivery is one POST to a hook's URL, as received.
type HookDelivery struct {
	Token string
	// Header reads a request header by case-insensitive name.
	Header func(name string) string
	// Body is the raw body, exactly as received: the signature covers these bytes.
	Body []byte
}

// HookReceipt is a delivery recorded: the runs it started (none when a debounce gathers it).
type HookReceipt struct {
	DeliveryID string         `json:"deliveryId"`
	WorkflowID string         `json:"workflowId"`
	Runs       []TriggeredRun `json:"runs"`
}

// ReceiveHook verifies a delivery to a hook's URL with the component's secret in its scheme,
// reshapes its body with the component's transform, and hands it to the component (deliver).
// An unknown or rotated-away token is domain.ErrNotFound, a bad signature ErrHookSignature:
// neither records anything. The same delivery id twice starts its run once.
func (h *Hooks) ReceiveHook(ctx context.Context, d HookDelivery) (HookReceipt, error) {
	s, err := h.hookOf(ctx, d.Token)
	if err != nil {
		return HookReceipt{}, err
	}
	wf, err := h.workflows.Workflow(ctx, s.WorkspaceID, s.WorkflowID)
	if err != nil {
		return HookReceipt{}, err
	}
	comp, ok := wf.Component(s.ComponentID)
	if !ok || comp.Module != workflow.ModuleOnWebhook {
		return HookReceipt{}, fmt.Errorf("hook: its component is gone: %w", domain.ErrNotFound)
	}
	cfg, err := workflow.ParseWebhook(comp.Config)
	if err != nil {
		return HookReceipt{}, err
	}
	if h.sealer == nil {
		return HookReceipt{}, errors.New("hook: no sealer configured to open its secret")
	}
	secret, err := h.sealer.Open(s.SealedSecret, hookSecretAAD(s.ID))
	if err != nil {
		return HookReceipt{}, fmt.Errorf("hook %s: open secret: %w", s.ID, err)
	}
	deliveryID, err := hook.Verify(cfg.Scheme, string(secret), hook.Signed{Header: d.Header, Body: d.Body}, h.now())
	if err != nil {
		return HookReceipt{}, err
	}
	payload, err := transformBody(ctx, cfg.Transform, d.Body)
	if err != nil {
		return HookReceipt{}, err
	}
	runs, err := deliver(ctx, h.workflows, Delivery{WorkspaceID: s.WorkspaceID, WorkflowID: s.WorkflowID, TriggerID: s.ComponentID,
		ID: deliveryID, Payload: payload})
	if err != nil {
		return HookReceipt{}, err
	}
	if runs == nil {
		runs = []TriggeredRun{}
	}
	return HookReceipt{DeliveryID: deliveryID, WorkflowID: s.WorkflowID, Runs: runs}, nil
}

// hookOf folds the hook a token names and checks the token against its hash in constant
// time; any mismatch is domain.ErrNotFound, whatever its cause, so the answer tells nothing
// about which part was wrong.
func (h *Hooks) hookOf(ctx context.Context, token string) (hook.State, error) {
	notFound := fmt.Errorf("hook: %w", domain.ErrNotFound)
	given := hook.Hash(token) // hashed whatever the token's shape: every refusal does the same work
	id, err := hook.ParseID(token)
	if err != nil {
		return hook.State{}, notFound
	}
	l, err := load(ctx, h, HookStream(id), hookAgg)
	if err != nil {
		return hook.State{}, err
	}
	if !l.state.Exists || subtle.ConstantTimeCompare([]byte(given), []byte(l.state.Hash)) != 1 {
		return hook.State{}, notFound
	}
	return l.state, nil
}

// transformBody is the trigger body of a delivery: its JSON body as sent, or what the jq
// transform makes of it, within TransformTimeout. Either must be one JSON object; anything
// else is a 400 naming the body or the transform.
func transformBody(ctx context.Context, transform string, body []byte) (json.RawMessage, error) {
	if err := domain.CheckJSONBody("body", body); err != nil {
		return nil, err
	}
	if transform == "" {
		if !isJSONObjectText(body) {
			return nil, domain.Invalid("body", "must be a JSON object (or config.transform must make one of it)")
		}
		return json.RawMessage(body), nil
	}
	code, err := modules.CompileJQ(transform)
	if err != nil {
		return nil, domain.Invalid("transform", "%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var in any
	if err := dec.Decode(&in); err != nil {
		return nil, domain.Invalid("body", "must be JSON: %v", err)
	}
	in = normalizeNumbers(in)
	ctx, cancel := context.WithTimeout(ctx, TransformTimeout)
	defer cancel()
	iter := code.RunWithContext(ctx, in)
	v, ok := iter.Next()
	if !ok {
		return nil, domain.Invalid("transform", "gave no result: it must give one JSON object")
	}
	if err, isErr := v.(error); isErr {
		if ctx.Err() != nil {
			return nil, domain.Invalid("transform", "took longer than %s", TransformTimeout)
		}
		return nil, domain.Invalid("transform", "jq: %v", err)
	}
	if _, isObj := v.(map[string]any); !isObj {
		return nil, domain.Invalid("transform", "must give a JSON object, not %s", jqType(v))
	}
	if next, more := iter.Next(); more {
		if _, isErr := next.(error); !isErr {
			return nil, domain.Invalid("transform", "gave several results: it must give one JSON object")
		}
	}
	out, err := gojq.Marshal(v)
	if err != nil {
		return nil, domain.Invalid("transform", "jq: %v", err)
	}
	if err := domain.CheckStorableJSON("transform", out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkTransform compiles an ON_WEBHOOK component's transform for the definition's checks.
func checkTransform(transform string) error {
	_, err := modules.CompileJQ(transform)
	return err
}

// normalizeNumbers turns json.Number into what gojq computes with (int or float64); numbers
// decoded as float64 would lose large integers' digits.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i)
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	}
	return v
}

func jqType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "a number"
	}
}

func isJSONObjectText(raw []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
