package workflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
)

// compiles stands in for the expression compiler: "bad" does not compile.
func compiles(when string) error {
	if strings.Contains(when, "bad") {
		return errors.New("expression error: unexpected token")
	}
	return nil
}

func TestValidateConditionsNamesTheEdge(t *testing.T) {
	const comps = `"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "e", "module": "FOR_EACH", "config": {"items": "xs"}},
		{"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"}]`
	cases := []struct {
		name, edges, field, message string
	}{
		{"compiles", `{"from": "t", "to": "e"}, {"from": "e", "to": "a"}, {"from": "a", "to": "b", "when": "output.ok"}`, "", ""},
		{"does not compile", `{"from": "t", "to": "e"}, {"from": "e", "to": "a"}, {"from": "a", "to": "b", "when": "bad >"}`, "edges[2].when", "expression error"},
		{"blank", `{"from": "t", "to": "e", "when": "  "}, {"from": "e", "to": "a"}, {"from": "a", "to": "b"}`, "edges[0].when", "must be an expression"},
		{"too long", `{"from": "t", "to": "e", "when": "` + strings.Repeat("x", 10001) + `"}, {"from": "e", "to": "a"}, {"from": "a", "to": "b"}`, "edges[0].when", "at most"},
		{"out of a FOR_EACH", `{"from": "t", "to": "e"}, {"from": "e", "to": "a", "when": "true"}, {"from": "a", "to": "b"}`, "edges[1].when", "inside the loop body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := parse(t, `{"name": "w", `+comps+`, "edges": [`+c.edges+`]}`)
			if err := d.Validate(checkModules); err != nil {
				t.Fatalf("the definition itself: %v", err)
			}
			err := d.ValidateConditions(compiles)
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
