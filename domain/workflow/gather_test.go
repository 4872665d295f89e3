package workflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
)

// gatherDef is t -> each -> a -> b, b -> g (after the loop), with FOR_EACH config cfg and the
// extra components and edges given.
func gatherDef(cfg, components, edges string) string {
	return `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": ` + cfg + `},
		{"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"}, {"id": "g", "module": "core.echo"}` + components + `],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "g"}` + edges + `]}`
}

func TestForEachBodyValidation(t *testing.T) {
	const body = `"items": ".", "body": ["a", "b"]`
	cases := []struct {
		name, def, field, msg string
	}{
		{"unknown id", gatherDef(`{"items": ".", "body": ["a", "ghost"]}`, "", ""), `components[1] (component "each").config.body[1]`, "names no component"},
		{"not downstream", gatherDef(`{"items": ".", "body": ["a", "b", "u"]}`, `, {"id": "u", "module": "core.echo"}`, `, {"from": "t", "to": "u"}`),
			`components[1] (component "each").config.body[2]`, "not downstream"},
		{"itself", gatherDef(`{"items": ".", "body": ["each"]}`, "", ""), `components[1] (component "each").config.body[0]`, "own body"},
		{"twice", gatherDef(`{"items": ".", "body": ["a", "a"]}`, "", ""), `components[1] (component "each").config.body[1]`, "twice"},
		{"an edge out of the FOR_EACH leaves the body", gatherDef(`{"items": ".", "body": ["a", "b"]}`, "", `, {"from": "each", "to": "g"}`),
			`components[1] (component "each").config.body`, `does not list "g"`},
		{"body waits on the gather", gatherDef(`{`+body+`}`, `, {"id": "x", "module": "core.echo"}`, `, {"from": "a", "to": "x"}, {"from": "x", "to": "b"}`),
			`components[1] (component "each").config.body`, `not closed: body component "b" takes input from "x"`},
		{"condition on a gather edge", `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED"},
			{"id": "each", "module": "FOR_EACH", "config": {` + body + `}}, {"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"}, {"id": "g", "module": "core.echo"}],
			"edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "g", "when": "true"}]}`,
			"edges[3].when", "gathers every iteration"},
		{"onFailure unknown", gatherDef(`{`+body+`, "onFailure": "ignore"}`, "", ""), `components[1] (component "each").config.onFailure`, `"continue"`},
		{"onFailure without body", gatherDef(`{"items": ".", "onFailure": "continue"}`, "", ""), `components[1] (component "each").config.onFailure`, "needs config.body"},
		{"two levels of nesting", gatherDef(`{"items": ".", "body": ["a", "b", "inner", "deep", "c"]}`,
			`, {"id": "inner", "module": "FOR_EACH", "config": {"items": "."}}, {"id": "deep", "module": "FOR_EACH", "config": {"items": "."}}, {"id": "c", "module": "core.echo"}`,
			`, {"from": "a", "to": "inner"}, {"from": "inner", "to": "deep"}, {"from": "deep", "to": "c"}`), `(component "deep")`, "two levels deep"},
		{"a nested body outside the outer body", gatherDef(`{"items": ".", "body": ["a", "b", "inner"]}`,
			`, {"id": "inner", "module": "FOR_EACH", "config": {"items": "."}}, {"id": "c", "module": "core.echo"}`,
			`, {"from": "a", "to": "inner"}, {"from": "inner", "to": "c"}`), `(component "inner").config.body`, `"c" is in the body of nested`},
		{"a nested gather out of both loops", gatherDef(`{"items": ".", "body": ["a", "b", "inner", "c"]}`,
			`, {"id": "inner", "module": "FOR_EACH", "config": {"items": ".", "body": ["c"]}}, {"id": "c", "module": "core.echo"}`,
			`, {"from": "a", "to": "inner"}, {"from": "inner", "to": "c"}, {"from": "c", "to": "g"}`), `edges[6]`, "at once"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := parse(t, c.def).Validate(checkModules)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a validation error, got %v", err)
			}
			if !strings.Contains(ve.Field, c.field) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q (field %q), want field %q and %q", err, ve.Field, c.field, c.msg)
			}
		})
	}
}

func TestForEachBodyAccepted(t *testing.T) {
	for name, d := range map[string]string{
		"gather":                       gatherDef(`{"items": ".", "body": ["a", "b"], "onFailure": "continue"}`, "", ""),
		"body input from before":       gatherDef(`{"items": ".", "body": ["a", "b"]}`, `, {"id": "pre", "module": "core.echo"}`, `, {"from": "t", "to": "pre"}, {"from": "pre", "to": "b"}`),
		"a FOR_EACH after the gather":  gatherDef(`{"items": ".", "body": ["a", "b"]}`, `, {"id": "again", "module": "FOR_EACH", "config": {"items": "items"}}, {"id": "c", "module": "core.echo"}`, `, {"from": "b", "to": "again"}, {"from": "again", "to": "c"}`),
		"without body: all downstream": gatherDef(`{"items": "."}`, "", ""),
		"one level of nesting": gatherDef(`{"items": ".", "body": ["a", "b", "inner", "c"]}`,
			`, {"id": "inner", "module": "FOR_EACH", "config": {"items": "item", "body": ["c"]}}, {"id": "c", "module": "core.echo"}`,
			`, {"from": "each", "to": "inner"}, {"from": "inner", "to": "c"}, {"from": "c", "to": "b"}`),
	} {
		if err := parse(t, d).Validate(checkModules); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
