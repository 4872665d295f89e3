// Package module is the workspace module aggregate (issue 28): a module a workspace registers
// for its own code, run by its workers (transport "worker") or by an HTTP endpoint the service
// POSTs each attempt to, signed (transport "http"). It is used wherever a built-in module is:
// submits, workflow components, FOR_EACH bodies, MCP tools.
//
// One stream per module and workspace, module-<workspaceId>.<name>: registering a name that is
// already registered is a conflict decided on the stream itself (two instances racing to
// register the same name append at the same expected revision, and the loser, deciding again,
// finds it taken). A deleted module's name may be registered again.
package module

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
)

// Category is the stream category of workspace modules: module-<workspaceId>.<name>.
const Category = "module"

// Bounds and defaults of a module's settings (issue 28).
const (
	MinNameLength        = 3
	MaxNameLength        = 100
	MaxDescriptionLength = 1000
	// MaxSchemaBytes bounds each JSON Schema document.
	MaxSchemaBytes   = 64 << 10
	MinTimeoutMs     = 1_000
	MaxTimeoutMs     = 3_600_000
	DefaultTimeoutMs = 60_000
	// MaxPrice is the highest price of one successful call.
	MaxPrice     billing.Credits = 1_000_000 * billing.Milli
	DefaultPrice billing.Credits = 1 * billing.Milli
	// MaxConcurrency bounds a module's concurrency setting (0: no bound).
	MaxConcurrency = 10_000
	MaxURLLength   = 2048
	// MaxSecretLength bounds the signing secret of an HTTP transport.
	MaxSecretLength = 1024
)

// ReservedNamespaces are the built-in modules' namespaces: no workspace module is named in them.
var ReservedNamespaces = []string{"core.", "json.", "text.", "expr.", "http."}

// ErrNotFound is a module the workspace does not have (never registered, or deleted). It
// matches domain.ErrNotFound too (a 404).
var ErrNotFound = fmt.Errorf("module %w", domain.ErrNotFound)

// Spec is what a module's owner sets: everything but its identity.
type Spec struct {
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// TimeoutMs is one attempt's deadline.
	TimeoutMs int64 `json:"timeoutMs"`
	// Price is what one successful call costs, in credits (thousandths internally).
	Price billing.Credits `json:"price"`
	// Cacheable lets identical calls be served from the cache window: user code may have side
	// effects, so a module must say so.
	Cacheable bool `json:"cacheable,omitempty"`
	// Concurrency bounds the module's tasks in flight for the workspace; 0: no bound.
	Concurrency int `json:"concurrency,omitempty"`
	// Transport is how attempts reach the user's code. Its SealedSecret is *sealed*; its
	// Concurrency is unused here (Spec.Concurrency is the setting).
	Transport execution.Transport `json:"transport"`
}

// Registered records a new module (or a name registered again after its module was deleted).
type Registered struct {
	WorkspaceID string    `json:"workspaceId"`
	Name        string    `json:"name"`
	Spec        Spec      `json:"spec"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (Registered) EventType() string { return "ModuleRegistered" }

// Updated replaces a module's spec as a whole.
type Updated struct {
	WorkspaceID string    `json:"workspaceId"`
	Name        string    `json:"name"`
	Spec        Spec      `json:"spec"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (Updated) EventType() string { return "ModuleUpdated" }

// Deleted removes a module: new submits naming it are refused; tasks in flight finish.
type Deleted struct {
	WorkspaceID string    `json:"workspaceId"`
	Name        string    `json:"name"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (Deleted) EventType() string { return "ModuleDeleted" }

func init() { domain.Events.Register(Registered{}, Updated{}, Deleted{}) }

// Module is a workspace module folded from its stream.
type Module struct {
	// Exists is true once registered, and stays true after a delete (Deleted says so).
	Exists      bool
	Deleted     bool
	WorkspaceID string
	Name        string
	Spec
	// Version is 1 when registered (again, after a delete: a new module) and grows by one
	// with each update.
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Evolve applies one event.
func (m Module) Evolve(e domain.Event) Module {
	switch ev := e.(type) {
	case Registered:
		m = Module{Exists: true, WorkspaceID: ev.WorkspaceID, Name: ev.Name, Spec: ev.Spec, Version: 1,
			CreatedAt: ev.At, UpdatedAt: ev.At}
	case Updated:
		m.Spec, m.Version, m.UpdatedAt = ev.Spec, m.Version+1, ev.At
	case Deleted:
		m.Deleted, m.UpdatedAt = true, ev.At
	}
	return m
}

// Live reports whether the module exists and is not deleted.
func (m Module) Live() bool { return m.Exists && !m.Deleted }

// Signed reports whether HTTP deliveries carry a signature (a secret is set).
func (m Module) Signed() bool { return m.Transport.SealedSecret != "" }

// ExecutionTransport is the transport a submit of the module records (Submitted.Transport),
// with its concurrency bound.
func (m Module) ExecutionTransport() *execution.Transport {
	t := m.Transport
	t.Concurrency = m.Concurrency
	return &t
}

// Register is the command to register a module. Spec.Transport.SealedSecret is the secret
// sealed by the caller (sealing is I/O-free but keyed; it happens in commands); Price nil is
// the default price, TimeoutMs 0 the default timeout.
type Register struct {
	WorkspaceID string
	Name        string
	Spec        Spec
	// PriceSet says Spec.Price was given (0 is a valid price); unset means DefaultPrice.
	PriceSet bool
	// Owner says the caller is an owner of the workspace: only owners set allowPrivate.
	Owner bool
}

// Update is the command to replace a module's spec. A transport of type http without a secret
// keeps the module's sealed secret (secrets are never shown, so a client cannot send it back).
type Update Register

// DecideRegister registers c.Name in the workspace; a live module of that name is a conflict.
func DecideRegister(m Module, c Register, now time.Time) ([]domain.Event, error) {
	if err := CheckName(c.Name); err != nil {
		return nil, err
	}
	if c.WorkspaceID == "" {
		return nil, domain.Invalid("workspaceId", "is required")
	}
	if m.Live() {
		return nil, domain.Conflict("module %s is already registered in this workspace", c.Name)
	}
	spec, err := checkSpec(Module{}, c)
	if err != nil {
		return nil, err
	}
	return []domain.Event{Registered{WorkspaceID: c.WorkspaceID, Name: c.Name, Spec: spec, At: now.UTC()}}, nil
}

// DecideUpdate replaces the spec of a live module; an unknown or deleted one is ErrNotFound.
func DecideUpdate(m Module, c Update, now time.Time) ([]domain.Event, error) {
	if !m.Live() || m.WorkspaceID != c.WorkspaceID {
		return nil, ErrNotFound
	}
	spec, err := checkSpec(m, Register(c))
	if err != nil {
		return nil, err
	}
	return []domain.Event{Updated{WorkspaceID: m.WorkspaceID, Name: m.Name, Spec: spec, At: now.UTC()}}, nil
}

// DecideDelete deletes a live module; an unknown or deleted one is ErrNotFound.
func DecideDelete(m Module, workspaceID string, now time.Time) ([]domain.Event, error) {
	if !m.Live() || m.WorkspaceID != workspaceID {
		return nil, ErrNotFound
	}
	return []domain.Event{Deleted{WorkspaceID: m.WorkspaceID, Name: m.Name, At: now.UTC()}}, nil
}

// CheckName applies the naming rules: 3 to 100 of [a-z0-9_.-], at least one '.', outside the
// built-in namespaces.
func CheckName(name string) error {
	if len(name) < MinNameLength || len(name) > MaxNameLength {
		return domain.Invalid("name", "must be %d to %d characters", MinNameLength, MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return domain.Invalid("name", "must hold only lowercase letters, digits, '_', '-' and '.'")
		}
	}
	if !strings.Contains(name, ".") {
		return domain.Invalid("name", "must contain a '.' (a namespace, as in acme.resize)")
	}
	if Reserved(name) {
		return domain.Invalid("name", "is in a namespace of the built-in modules (%s)", strings.Join(ReservedNamespaces, ", "))
	}
	return nil
}

// Reserved reports whether name is in a built-in namespace.
func Reserved(name string) bool {
	for _, ns := range ReservedNamespaces {
		if strings.HasPrefix(name, ns) {
			return true
		}
	}
	return false
}

// ParsePrice reads a price as the API and the console take it: credits with up to three
// decimals ("2.5"); errors name the field price.
func ParsePrice(s string) (billing.Credits, error) {
	p, err := billing.ParseCredits(strings.TrimSpace(s))
	if ve, ok := err.(*domain.ValidationError); ok {
		return 0, domain.Invalid("price", "%s", ve.Message)
	}
	return p, err
}

// CheckSecret checks an HTTP transport's secret before it is sealed (the domain never sees it
// in the clear otherwise).
func CheckSecret(secret string) error {
	if err := domain.CheckStorableString("transport.secret", secret); err != nil {
		return err
	}
	if len(secret) > MaxSecretLength {
		return domain.Invalid("transport.secret", "must be at most %d characters", MaxSecretLength)
	}
	return nil
}

// checkSpec checks c's spec against the module as it is (prev; zero for a registration) and
// fills its defaults.
func checkSpec(prev Module, c Register) (Spec, error) {
	s := c.Spec
	s.Description = strings.TrimSpace(s.Description)
	if err := domain.CheckStorableString("description", s.Description); err != nil {
		return s, err
	}
	if utf8.RuneCountInString(s.Description) > MaxDescriptionLength {
		return s, domain.Invalid("description", "must be at most %d characters", MaxDescriptionLength)
	}
	for _, f := range []struct {
		field string
		doc   json.RawMessage
	}{{"inputSchema", s.InputSchema}, {"configSchema", s.ConfigSchema}, {"outputSchema", s.OutputSchema}} {
		if err := checkSchemaDoc(f.field, f.doc); err != nil {
			return s, err
		}
	}
	if s.TimeoutMs == 0 {
		s.TimeoutMs = DefaultTimeoutMs
	}
	if s.TimeoutMs < MinTimeoutMs || s.TimeoutMs > MaxTimeoutMs {
		return s, domain.Invalid("timeoutMs", "must be from %d to %d", MinTimeoutMs, MaxTimeoutMs)
	}
	if !c.PriceSet {
		s.Price = DefaultPrice
	}
	if s.Price < 0 || s.Price > MaxPrice {
		return s, domain.Invalid("price", "must be from 0 to %s credits", MaxPrice)
	}
	if s.Concurrency < 0 || s.Concurrency > MaxConcurrency {
		return s, domain.Invalid("concurrency", "must be from 0 (no bound) to %d", MaxConcurrency)
	}
	t, err := checkTransport(prev, c.Owner, s.Transport)
	s.Transport = t
	return s, err
}

// checkSchemaDoc checks that a schema, when given, is a JSON object or boolean of bounded size
// (commands compiles it: the domain does no schema work).
func checkSchemaDoc(field string, doc json.RawMessage) error {
	if len(doc) == 0 {
		return nil
	}
	if len(doc) > MaxSchemaBytes {
		return domain.Invalid(field, "must be at most %d bytes", MaxSchemaBytes)
	}
	if err := domain.CheckStorableJSON(field, doc); err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return domain.Invalid(field, "must be valid JSON")
	}
	switch v.(type) {
	case map[string]any, bool:
		return nil
	}
	return domain.Invalid(field, "must be a JSON Schema (an object or a boolean)")
}

// checkTransport checks the transport. An http transport needs an absolute https URL; plain
// http is accepted only with allowPrivate, which is meant for services on a private network
// (and local development), where TLS is often not set up. allowPrivate is set by owners only:
// an admin may keep a module's allowPrivate as it is (same URL) or turn it off.
func checkTransport(prev Module, owner bool, t execution.Transport) (execution.Transport, error) {
	t.Concurrency = 0
	switch t.Type {
	case execution.TransportWorker:
		if t.URL != "" || t.SealedSecret != "" || t.AllowPrivate {
			return t, domain.Invalid("transport", "a worker transport takes no url, secret or allowPrivate")
		}
		return t, nil
	case execution.TransportHTTP:
	case "":
		return t, domain.Invalid("transport.type", "is required: worker or http")
	default:
		return t, domain.Invalid("transport.type", "must be worker or http")
	}
	if err := checkURL(t.URL, t.AllowPrivate); err != nil {
		return t, err
	}
	kept := prev.Transport.Type == execution.TransportHTTP
	if t.AllowPrivate && !owner && !(kept && prev.Transport.AllowPrivate && prev.Transport.URL == t.URL) {
		return t, domain.Forbidden("transport.allowPrivate: only an owner of the workspace may set it")
	}
	if t.SealedSecret == "" && kept {
		t.SealedSecret = prev.Transport.SealedSecret
	}
	if t.SealedSecret == "" {
		return t, domain.Invalid("transport.secret", "is required for an http transport: each request is signed with it")
	}
	return t, nil
}

func checkURL(raw string, allowPrivate bool) error {
	const field = "transport.url"
	if raw == "" {
		return domain.Invalid(field, "is required for an http transport")
	}
	if err := domain.CheckStorableString(field, raw); err != nil {
		return err
	}
	if len(raw) > MaxURLLength {
		return domain.Invalid(field, "must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Hostname() == "" {
		return domain.Invalid(field, "must be an absolute https URL")
	}
	if u.User != nil {
		return domain.Invalid(field, "must not carry credentials")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	case u.Scheme == "http":
		return domain.Invalid(field, "must use https (plain http only with allowPrivate)")
	default:
		return domain.Invalid(field, "must be an https URL")
	}
	return nil
}
