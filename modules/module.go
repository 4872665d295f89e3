// Package modules holds the component modules Switchyard can execute: the
// [Module] contract, a [Registry] of modules, and the built-ins returned by
// [Builtins]. It imports nothing from the rest of the repository.
//
// The life of a call: at submit, [Registry.Validate] (or [Module.Validate])
// checks config and input against the module's JSON Schemas and its own
// semantic checks (a jq program or expression must compile) and returns a
// *ValidationError naming the field; the executor then calls
// [Registry.Run], which re-validates, applies the module's timeout, recovers
// panics and classifies errors: a *Failure is the module's verdict and is
// shown to the user as the execution's error, anything else is an
// infrastructure error.
package modules

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Call is one invocation of a module.
type Call struct {
	Config      json.RawMessage // the submitted config object
	Input       json.RawMessage // the submitted input object
	Attempt     int             // 1-based attempt number (0 is treated as 1 by Registry.Run)
	ExecutionID string          // the execution this call belongs to
}

// Module is a component module.
//
// Run reports a failure of the call (bad data, an unreachable URL, ...) as a
// *Failure; other errors are taken as infrastructure errors only when marked
// with [Infrastructure] or when they are the context's error. Run may assume
// Validate has passed when it is called through [Registry.Run].
type Module interface {
	Name() string                  // e.g. "core.echo"
	Description() string           // one line, for listings
	CostMilli() int64              // millicredits billed per successful call (1 credit = 1000)
	ConfigSchema() json.RawMessage // JSON Schema of config
	InputSchema() json.RawMessage  // JSON Schema of input
	Timeout() time.Duration        // default per-run deadline
	Validate(config, input json.RawMessage) error
	// ValidateConfig checks config alone, as a workflow definition is
	// checked before any input exists.
	ValidateConfig(config json.RawMessage) error
	Run(ctx context.Context, call Call) (output json.RawMessage, err error)
}

// Definition describes a module for [NewModule].
type Definition struct {
	Name         string
	Description  string
	CostMilli    int64
	ConfigSchema json.RawMessage // nil means {"type": "object"}
	InputSchema  json.RawMessage // nil means {"type": "object"}
	Timeout      time.Duration   // zero means DefaultTimeout
	// Repeatable declares that running a call twice is harmless: the run has no effect
	// outside its output (echo, jq, template, expr). The executor runs such a call before
	// claiming it and records claim and outcome in one append; a call that is not repeatable
	// (http.request) is claimed first, so that it runs once. See [IsRepeatable].
	Repeatable bool

	// CheckConfig runs after the config schema passed, for semantic checks
	// of config alone (compiling a program), so that a workflow definition,
	// which has no input yet, is checked too. It should return a
	// *ValidationError.
	CheckConfig func(config json.RawMessage) error
	// Check runs after both schemas passed, for semantic checks (compiling
	// a program, cross-field rules). It should return a *ValidationError.
	Check func(config, input json.RawMessage) error
	// Run executes the call.
	Run func(ctx context.Context, call Call) (json.RawMessage, error)
}

// DefaultTimeout is the run deadline of a module whose Definition has none.
const DefaultTimeout = 30 * time.Second

var (
	nameRE        = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$`)
	defaultSchema = json.RawMessage(`{"type":"object"}`)
)

// NewModule builds a Module from a Definition, compiling its schemas.
func NewModule(d Definition) (Module, error) {
	if !nameRE.MatchString(d.Name) {
		return nil, fmt.Errorf("modules: invalid module name %q", d.Name)
	}
	if d.Run == nil {
		return nil, fmt.Errorf("modules: module %s has no Run function", d.Name)
	}
	if d.CostMilli < 0 {
		return nil, fmt.Errorf("modules: module %s has a negative cost", d.Name)
	}
	if d.ConfigSchema == nil {
		d.ConfigSchema = defaultSchema
	}
	if d.InputSchema == nil {
		d.InputSchema = defaultSchema
	}
	if d.Timeout <= 0 {
		d.Timeout = DefaultTimeout
	}
	cs, err := compileSchema(d.Name+":config", d.ConfigSchema)
	if err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	is, err := compileSchema(d.Name+":input", d.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	return &module{def: d, config: cs, input: is}, nil
}

func mustModule(d Definition) Module {
	m, err := NewModule(d)
	if err != nil {
		panic(err)
	}
	return m
}

type module struct {
	def           Definition
	config, input *jsonschema.Schema
}

func (m *module) Name() string                  { return m.def.Name }
func (m *module) Description() string           { return m.def.Description }
func (m *module) CostMilli() int64              { return m.def.CostMilli }
func (m *module) ConfigSchema() json.RawMessage { return m.def.ConfigSchema }
func (m *module) InputSchema() json.RawMessage  { return m.def.InputSchema }
func (m *module) Timeout() time.Duration        { return m.def.Timeout }
func (m *module) Repeatable() bool              { return m.def.Repeatable }

// IsRepeatable reports whether m declares that running a call twice is harmless (a module
// with a Repeatable() bool method returning true). Modules that say nothing are not.
func IsRepeatable(m Module) bool {
	r, ok := m.(interface{ Repeatable() bool })
	return ok && r.Repeatable()
}

// repeatable marks a built-in module whose runs are harmless to repeat.
func repeatable(m Module) Module {
	if mm, ok := m.(*module); ok {
		mm.def.Repeatable = true
	}
	return m
}

func (m *module) ValidateConfig(config json.RawMessage) error {
	if err := checkSchema("config", m.config, config); err != nil {
		return err
	}
	if m.def.CheckConfig != nil {
		return m.def.CheckConfig(config)
	}
	return nil
}

func (m *module) Validate(config, input json.RawMessage) error {
	if err := m.ValidateConfig(config); err != nil {
		return err
	}
	if err := checkSchema("input", m.input, input); err != nil {
		return err
	}
	if m.def.Check != nil {
		return m.def.Check(config, input)
	}
	return nil
}

func (m *module) Run(ctx context.Context, call Call) (json.RawMessage, error) {
	return m.def.Run(ctx, call)
}

// Info describes a module for listings (API, MCP).
type Info struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	CostMilli    int64           `json:"costMilli"`
	Cost         float64         `json:"cost"` // credits: CostMilli / 1000
	ConfigSchema json.RawMessage `json:"configSchema"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	Timeout      time.Duration   `json:"-"`
	TimeoutMs    int64           `json:"timeoutMs"`
}

// InfoOf returns the listing entry of m.
func InfoOf(m Module) Info {
	return Info{
		Name:         m.Name(),
		Description:  m.Description(),
		CostMilli:    m.CostMilli(),
		Cost:         MilliToCredits(m.CostMilli()),
		ConfigSchema: m.ConfigSchema(),
		InputSchema:  m.InputSchema(),
		Timeout:      m.Timeout(),
		TimeoutMs:    m.Timeout().Milliseconds(),
	}
}

// MilliToCredits converts millicredits to credits for display.
func MilliToCredits(milli int64) float64 { return float64(milli) / 1000 }
