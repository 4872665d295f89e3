package workflow

import (
	"strings"

	"github.com/switchyard/switchyard/domain"
)

// Concurrency bounds a workflow's runs per key: at most Limit runs whose trigger bodies give
// the same Key run at once; the others wait CREATED, in trigger order, and start as those end.
type Concurrency struct {
	// Key is an expression in expr.eval's language over the trigger body: its top-level
	// fields are variables, and the whole is `payload`. It is evaluated once, when the run is
	// triggered; a string result is the key, any other value its JSON text.
	Key string `json:"key"`
	// Limit is how many runs of one key may be in flight at once (MinConcurrencyLimit to
	// MaxConcurrencyLimit).
	Limit int `json:"limit"`
}

// Bounds of a definition's concurrency.
const (
	MinConcurrencyLimit = 1
	MaxConcurrencyLimit = 1000
	// MaxConcurrencyKeyLength bounds the key expression, as MaxWhenLength bounds a `when`.
	MaxConcurrencyKeyLength = 10000
)

// ExpressionCheck compiles an expression over a payload (a concurrency key, a WAIT's until):
// nil, or an error saying why it does not compile.
type ExpressionCheck func(src string) error

// ValidateConcurrency checks a definition's concurrency, if it has one; the error names
// concurrency.key or concurrency.limit. check compiles the key (commands holds the language).
func (d Definition) ValidateConcurrency(check ExpressionCheck) error {
	c := d.Concurrency
	if c == nil {
		return nil
	}
	if c.Limit < MinConcurrencyLimit || c.Limit > MaxConcurrencyLimit {
		return domain.Invalid("concurrency.limit", "must be between %d and %d", MinConcurrencyLimit, MaxConcurrencyLimit)
	}
	switch {
	case strings.TrimSpace(c.Key) == "":
		return domain.Invalid("concurrency.key", "must be an expression over the trigger body, such as customerId")
	case len(c.Key) > MaxConcurrencyKeyLength:
		return domain.Invalid("concurrency.key", "must be at most %d characters", MaxConcurrencyKeyLength)
	}
	if err := domain.CheckStorableString("concurrency.key", c.Key); err != nil {
		return err
	}
	if err := check(c.Key); err != nil {
		return domain.Invalid("concurrency.key", "%s", err)
	}
	return nil
}
