package workflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
)

func TestValidateConcurrencyNamesTheField(t *testing.T) {
	cases := []struct {
		name, concurrency, field, message string
	}{
		{"none", ``, "", ""},
		{"valid", `, "concurrency": {"key": "customerId", "limit": 1}`, "", ""},
		{"the largest limit", `, "concurrency": {"key": "payload.region", "limit": 1000}`, "", ""},
		{"limit zero", `, "concurrency": {"key": "customerId", "limit": 0}`, "concurrency.limit", "between 1 and 1000"},
		{"limit too large", `, "concurrency": {"key": "customerId", "limit": 1001}`, "concurrency.limit", "between 1 and 1000"},
		{"no key", `, "concurrency": {"limit": 2}`, "concurrency.key", "must be an expression"},
		{"blank key", `, "concurrency": {"key": "  ", "limit": 2}`, "concurrency.key", "must be an expression"},
		{"key does not compile", `, "concurrency": {"key": "bad +", "limit": 2}`, "concurrency.key", "expression error"},
		{"key too long", `, "concurrency": {"key": "` + strings.Repeat("x", 10001) + `", "limit": 2}`, "concurrency.key", "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := parse(t, `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
				"edges": [{"from": "t", "to": "a"}]`+c.concurrency+`}`)
			err := d.ValidateConcurrency(compiles)
			if c.field == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(ve.Message, c.message) {
				t.Fatalf("got %v, want %s: ...%s...", err, c.field, c.message)
			}
		})
	}
}
