// Package configcheck holds what the XxxConfig structs with several durations share: their
// defaults and the check that none is negative (docs/architecture.md, "Configuration structs").
package configcheck

import (
	"fmt"
	"time"
)

// Duration is one time.Duration field of a config: its name for errors, where it is, and the
// value zero stands for.
type Duration struct {
	Name    string
	Value   *time.Duration
	Default time.Duration
}

// SetDefaults gives each field at zero its default; with repair, each negative one too (for
// constructors that return no error).
func SetDefaults(fields []Duration, repair bool) {
	for _, f := range fields {
		if *f.Value == 0 || (repair && *f.Value < 0) {
			*f.Value = f.Default
		}
	}
}

// NotNegative reports the first negative field, by name, prefixed with component.
func NotNegative(component string, fields []Duration) error {
	for _, f := range fields {
		if *f.Value < 0 {
			return fmt.Errorf("%s: %s %v: must not be negative", component, f.Name, *f.Value)
		}
	}
	return nil
}
