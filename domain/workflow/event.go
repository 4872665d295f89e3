package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/switchyard/switchyard/domain"
)

// MaxEventNameLength bounds an event's name.
const MaxEventNameLength = 200

// eventNameRE is what an event name may be: "order.paid", "github/push", "invoice:created".
var eventNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)

// EventConfig is the config of an ON_EVENT component: it starts a run for each event sent to
// POST /v1/sdk/events with its name whose payload passes its filter.
type EventConfig struct {
	// Name is the event name the component listens for (1 to 200 letters, digits, '_', '.',
	// ':', '/' or '-').
	Name string `json:"name"`
	// Filter, when set, is an expression over the payload (its top-level fields as variables,
	// the whole as payload) that must hold for the event to start a run.
	Filter string `json:"filter,omitempty"`
	// Debounce, when set, gathers the events by key into one run (debounce.go).
	Debounce *DebounceConfig `json:"debounce,omitempty"`
}

// CheckEventName checks an event's name, naming field.
func CheckEventName(field, name string) error {
	switch {
	case name == "":
		return domain.Invalid(field, "is required")
	case len(name) > MaxEventNameLength || !eventNameRE.MatchString(name):
		return domain.Invalid(field, "must be 1 to %d letters, digits, '_', '.', ':', '/' or '-', starting with a letter or digit", MaxEventNameLength)
	}
	return nil
}

// ParseEvent reads and checks an ON_EVENT config; fields are named from "config".
func ParseEvent(config json.RawMessage) (EventConfig, error) {
	var c EventConfig
	var raw struct {
		Name     string          `json:"name"`
		Filter   string          `json:"filter"`
		Debounce json.RawMessage `json:"debounce"`
	}
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return c, domain.Invalid("config", `must be {"name": event name, "filter": expression, "debounce": {...}}: %v`, err)
	}
	c.Name, c.Filter = raw.Name, raw.Filter
	if err := CheckEventName("config.name", c.Name); err != nil {
		return c, err
	}
	switch {
	case c.Filter != "" && strings.TrimSpace(c.Filter) == "":
		return c, domain.Invalid("config.filter", "must be an expression, or left out to take every event of the name")
	case len(c.Filter) > MaxWhenLength:
		return c, domain.Invalid("config.filter", "must be at most %d characters", MaxWhenLength)
	}
	if err := domain.CheckStorableString("config.filter", c.Filter); err != nil {
		return c, err
	}
	d, err := ParseDebounce(config)
	if ve, ok := err.(*domain.ValidationError); ok {
		return c, domain.Invalid("config."+ve.Field, "%s", ve.Message)
	}
	c.Debounce = d
	return c, err
}

// checkEventConfig checks an ON_EVENT component's config.
func checkEventConfig(config json.RawMessage) error {
	_, err := ParseEvent(config)
	return err
}

// ValidateTriggerExpressions compiles the expressions of a validated definition's triggers:
// an ON_EVENT's filter with filter (it must give a boolean), an ON_EVENT's or ON_WEBHOOK's
// debounce key with value (any value); the error names the field.
func (d Definition) ValidateTriggerExpressions(filter, value ConditionCheck) error {
	for i, c := range d.Components {
		who := fmt.Sprintf("components[%d] (component %q).config", i, c.ID)
		var src string
		switch c.Module {
		case ModuleOnEvent:
			ec, err := ParseEvent(c.Config)
			if err != nil {
				return err
			}
			src = ec.Filter
		case ModuleOnWebhook:
		default:
			continue
		}
		if src != "" {
			if err := filter(src); err != nil {
				return domain.Invalid(who+".filter", "%s", err)
			}
		}
		db, err := ParseDebounce(c.Config)
		if err != nil {
			return err
		}
		if db != nil && db.Key != "" {
			if err := value(db.Key); err != nil {
				return domain.Invalid(who+".debounce.key", "%s", err)
			}
		}
	}
	return nil
}
