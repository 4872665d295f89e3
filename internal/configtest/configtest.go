// Package configtest checks the Validate methods of the XxxConfig structs (docs/architecture.md,
// "Configuration structs"): a valid config passes, and each invalid one fails naming its field.
package configtest

import (
	"strings"
	"testing"
)

// Case is the result of Validate on a config with one field out of range.
type Case struct {
	// Field is the name the error must carry.
	Field string
	// Err is what Validate returned.
	Err error
}

// Check fails t unless valid is nil and every case's error names its field.
func Check(t testing.TB, valid error, cases []Case) {
	t.Helper()
	if valid != nil {
		t.Errorf("Validate of a valid config: %v", valid)
	}
	for _, c := range cases {
		switch {
		case c.Err == nil:
			t.Errorf("%s: Validate accepted an invalid value", c.Field)
		case !strings.Contains(c.Err.Error(), c.Field):
			t.Errorf("%s: error %q does not name the field", c.Field, c.Err)
		}
	}
}
