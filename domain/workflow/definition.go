// Package workflow is the workflow definition aggregate (SPEC.md 2.7, 2.9, 4.8): components
// with a module, config and canvas position, edges between them, ON_API_CALLED triggers and
// FOR_EACH iterators, validated as a whole before any of it is stored.
package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/retry"
)

// The control modules: they are resolved by the scheduler, not run by the executor.
const (
	// ModuleTrigger starts a run when POST /v1/sdk/workflows/:id is called; its output is the
	// request body (an object, {} when there is none).
	ModuleTrigger = "ON_API_CALLED"
	// ModuleForEach runs everything downstream of it once per item of an array.
	ModuleForEach = "FOR_EACH"
)

// Limits of a definition.
const (
	MaxComponents      = 200
	MaxNameLength      = 200
	MaxDescription     = 2000
	MaxAttempts        = 3
	DefaultConcurrency = 25
	MaxConcurrency     = 200
	// MaxItems bounds the array a FOR_EACH iterates over.
	MaxItems = 10000
)

// Position is a component's canvas position [x, y].
type Position [2]float64

// ErrPosition is the decoding error of a position that is not two numbers.
var ErrPosition = errors.New("position: must be an array of two numbers [x, y]")

// UnmarshalJSON takes exactly two numbers: encoding/json would drop a third or zero a
// missing one without a word.
func (p *Position) UnmarshalJSON(b []byte) error {
	var xs []*float64 // a null element would read as 0 into a float64
	if err := json.Unmarshal(b, &xs); err != nil || len(xs) != 2 || xs[0] == nil || xs[1] == nil {
		return ErrPosition
	}
	*p = Position{*xs[0], *xs[1]}
	return nil
}

// Component is one node of the workflow graph.
type Component struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Module   string          `json:"module"`
	Config   json.RawMessage `json:"config"`
	Position Position        `json:"position"`
	// Attempts is how often a failing stage of this component is tried (1 to 3; with Retry,
	// its attempts, 1 to 10).
	Attempts int `json:"attempts"`
	// Retry is the stage's retry policy: attempts, backoff, non-retryable codes. Nil: the
	// executor's default pace.
	Retry *retry.Policy `json:"retry,omitempty"`
	// TimeoutMs bounds one attempt of the component's stages (100 to 3 600 000; 0: the
	// module's own deadline); an attempt past it fails with code timeout.
	TimeoutMs int64     `json:"timeoutMs,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Control reports whether the scheduler resolves the component itself.
func (c Component) Control() bool {
	return IsTrigger(c.Module) || c.Module == ModuleForEach || c.Module == ModuleRunWorkflow || c.Module == ModuleWait
}

// Edge feeds From's output into To's input. Without a mapping an object output is merged into
// the input at the top level (a non-object output lands under the upstream component's id);
// with one, each input key takes the value at a path into the output (Lookup). An edge with a
// When is taken only when its condition holds for From's output (conditions.go).
type Edge struct {
	From    string            `json:"from"`
	To      string            `json:"to"`
	Mapping map[string]string `json:"mapping,omitempty"`
	When    string            `json:"when,omitempty"`
}

// Definition is what a workflow is made of; a run keeps a copy of the one it started with.
type Definition struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Components  []Component `json:"components"`
	Edges       []Edge      `json:"edges"`
	// TimeoutMs bounds a whole run (100 to 86 400 000; 0: none): a run still unfinished at
	// its trigger time plus TimeoutMs fails with code run_timeout.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Notify, when set, is told when each run ends (notify.go).
	Notify *Notify `json:"notify,omitempty"`
	// Concurrency, when set, bounds the runs of each key in flight at once (concurrency.go).
	Concurrency *Concurrency `json:"concurrency,omitempty"`
}

// Bounds of a definition's timeoutMs.
const (
	MinRunTimeoutMs = 100
	MaxRunTimeoutMs = 86_400_000
)

// ForEachConfig is the config of a FOR_EACH component.
type ForEachConfig struct {
	// Items is the path (Lookup) into the upstream output of the array to iterate over.
	Items string `json:"items"`
	// Concurrency bounds the iterations in flight (default DefaultConcurrency).
	Concurrency int `json:"concurrency,omitempty"`
	// Body lists the components run once per item; empty means everything downstream.
	// Components downstream of an explicit body and outside it gather its results.
	Body []string `json:"body,omitempty"`
	// OnFailure is OnFailureFail (the default) or OnFailureContinue; only with Body.
	OnFailure string `json:"onFailure,omitempty"`
}

// What a FOR_EACH with a body does when an iteration fails.
const (
	// OnFailureFail: the first failed iteration fails the FOR_EACH and the run.
	OnFailureFail = "fail"
	// OnFailureContinue: the FOR_EACH completes; the failed iterations are listed.
	OnFailureContinue = "continue"
)

// ModuleCheck validates a module component's config: nil, or an error naming the field
// ("module" for an unknown module, "config..." for the config) as a *domain.ValidationError.
type ModuleCheck func(module string, config json.RawMessage) error

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Normalize fills defaults (config {}, attempts 1, name from id). newID supplies ids for
// components that have none. It changes d's own copy of the components: a Definition passed by
// value shares its slices with the caller's.
func (d *Definition) Normalize(newID func() string) {
	d.Name = strings.TrimSpace(d.Name)
	d.Components = slices.Clone(d.Components)
	for i := range d.Components {
		c := &d.Components[i]
		if c.ID == "" {
			c.ID = newID()
		}
		if len(c.Config) == 0 || string(c.Config) == "null" {
			c.Config = json.RawMessage(`{}`)
		}
		if c.Retry != nil {
			p := c.Retry.Normalized(c.Attempts)
			c.Retry = &p
		}
		if c.Attempts == 0 {
			c.Attempts = 1
			if c.Retry != nil {
				c.Attempts = c.Retry.Attempts
			}
		}
		if strings.TrimSpace(c.Name) == "" {
			c.Name = c.ID
		}
	}
	if d.Edges == nil {
		d.Edges = []Edge{}
	}
	if d.Components == nil {
		d.Components = []Component{}
	}
}

// Validate checks a normalized definition; the error names the component or edge at fault.
func (d Definition) Validate(check ModuleCheck) error {
	if err := d.validateHeader(); err != nil {
		return err
	}
	index := map[string]int{}
	for i, c := range d.Components {
		field := fmt.Sprintf("components[%d]", i)
		if !idRE.MatchString(c.ID) {
			return domain.Invalid(field+".id", "must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")
		}
		if _, dup := index[c.ID]; dup {
			return domain.Invalid(field+".id", "duplicates component %q", c.ID)
		}
		index[c.ID] = i
		if err := validateComponent(field, c, check); err != nil {
			return err
		}
	}
	if err := d.storableMappings(); err != nil {
		return err
	}
	g, err := d.graph(index)
	if err != nil {
		return err
	}
	return g.validate(d)
}

func (d Definition) validateHeader() error {
	switch {
	case d.Name == "":
		return domain.Invalid("name", "is required")
	case len(d.Name) > MaxNameLength:
		return domain.Invalid("name", "must be at most %d characters", MaxNameLength)
	case len(d.Description) > MaxDescription:
		return domain.Invalid("description", "must be at most %d characters", MaxDescription)
	case len(d.Components) == 0:
		return domain.Invalid("components", "must hold at least one trigger component (%s)", triggerList())
	case len(d.Components) > MaxComponents:
		return domain.Invalid("components", "must hold at most %d components", MaxComponents)
	case d.TimeoutMs != 0 && (d.TimeoutMs < MinRunTimeoutMs || d.TimeoutMs > MaxRunTimeoutMs):
		return domain.Invalid("timeoutMs", "must be from %d to %d milliseconds", MinRunTimeoutMs, MaxRunTimeoutMs)
	}
	if err := domain.CheckStorableString("name", d.Name); err != nil {
		return err
	}
	return domain.CheckStorableString("description", d.Description)
}

// storableMappings checks the edges' mapping text can be stored (ids are checked by pattern).
func (d Definition) storableMappings() error {
	for i, e := range d.Edges {
		field := fmt.Sprintf("edges[%d].mapping", i)
		for k, v := range e.Mapping {
			if err := domain.CheckStorableString(field, k+v); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateComponent(field string, c Component, check ModuleCheck) error {
	who := fmt.Sprintf("%s (component %q)", field, c.ID)
	if len(c.Name) > MaxNameLength {
		return domain.Invalid(who+".name", "must be at most %d characters", MaxNameLength)
	}
	if err := domain.CheckStorableString(who+".name", c.Name); err != nil {
		return err
	}
	if err := domain.CheckStorableJSON(who+".config", c.Config); err != nil {
		return err
	}
	if err := ValidPosition(c.Position); err != nil {
		return domain.Invalid(who+".position", "%s", err)
	}
	if err := validateAttempts(who, c); err != nil {
		return err
	}
	if err := validateTimeout(who, c); err != nil {
		return err
	}
	err := checkConfig(c, check)
	if ve, ok := err.(*domain.ValidationError); ok {
		return domain.Invalid(who+"."+ve.Field, "%s", ve.Message)
	}
	return err
}

// validateAttempts checks attempts alone (1 to 3), or a retry policy and that attempts, if
// given beside it, says the same.
func validateAttempts(who string, c Component) error {
	if c.Retry == nil {
		if c.Attempts < 1 || c.Attempts > MaxAttempts {
			return domain.Invalid(who+".attempts", "must be an integer from 1 to %d (up to %d with a retry policy)", MaxAttempts, retry.MaxAttempts)
		}
		return nil
	}
	if c.Control() {
		return domain.Invalid(who+".retry", "is not allowed on a %s component: it runs no module", c.Module)
	}
	if err := c.Retry.Validate(who + ".retry"); err != nil {
		return err
	}
	if c.Attempts != c.Retry.Attempts {
		return domain.Invalid(who+".attempts", "is %d but retry.attempts is %d: give one of them", c.Attempts, c.Retry.Attempts)
	}
	return nil
}

// validateTimeout checks an attempt's timeoutMs, which only a module component has.
func validateTimeout(who string, c Component) error {
	if c.TimeoutMs != 0 && c.Control() {
		return domain.Invalid(who+".timeoutMs", "is not allowed on a %s component: it runs no module", c.Module)
	}
	return execution.CheckTimeout(who+".timeoutMs", c.TimeoutMs)
}

// checkConfig checks a component's module and config; fields are named from the component.
func checkConfig(c Component, check ModuleCheck) error {
	if !isObject(c.Config) {
		return domain.Invalid("config", "must be a JSON object")
	}
	switch c.Module {
	case "":
		return domain.Invalid("module", "is required")
	case ModuleTrigger:
		return nil
	case ModuleOnSchedule:
		return checkScheduleConfig(c.Config)
	case ModuleOnEvent:
		return checkEventConfig(c.Config)
	case ModuleOnWebhook:
		return checkWebhookConfig(c.Config)
	case ModuleWait:
		return checkWaitConfig(c.Config)
	case ModuleForEach:
		_, err := ParseForEach(c.Config)
		return err
	case ModuleRunWorkflow:
		_, err := ParseRunWorkflow(c.Config)
		return err
	default:
		return check(c.Module, c.Config)
	}
}

// ValidPosition checks that a position is two finite numbers.
func ValidPosition(p Position) error {
	for _, v := range p {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("must be two finite numbers [x, y]")
		}
	}
	return nil
}

// ParseForEach reads and checks a FOR_EACH config, applying the default concurrency.
func ParseForEach(config json.RawMessage) (ForEachConfig, error) {
	var fc ForEachConfig
	dec := json.NewDecoder(strings.NewReader(string(config)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return fc, domain.Invalid("config", "must be {\"items\": path, \"concurrency\": n, \"body\": [ids], \"onFailure\": \"fail\" | \"continue\"}: %v", err)
	}
	if strings.TrimSpace(fc.Items) == "" {
		return fc, domain.Invalid("config.items", "is required: the path of the array to iterate over in the upstream output (\".\" for the whole output)")
	}
	if fc.Concurrency == 0 {
		fc.Concurrency = DefaultConcurrency
	}
	if fc.Concurrency < 1 || fc.Concurrency > MaxConcurrency {
		return fc, domain.Invalid("config.concurrency", "must be from 1 to %d", MaxConcurrency)
	}
	switch {
	case fc.OnFailure != "" && fc.OnFailure != OnFailureFail && fc.OnFailure != OnFailureContinue:
		return fc, domain.Invalid("config.onFailure", "must be %q or %q", OnFailureFail, OnFailureContinue)
	case fc.OnFailure != "" && len(fc.Body) == 0:
		return fc, domain.Invalid("config.onFailure", "needs config.body: without a body every failure fails the run")
	case fc.OnFailure == "":
		fc.OnFailure = OnFailureFail
	}
	return fc, nil
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
