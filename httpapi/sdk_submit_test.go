package httpapi

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
)

// A body with several unknown fields is refused naming the first of them in name order, the same
// one every time: a map's order would name any of them.
func TestUnknownFieldsAreNamedInNameOrder(t *testing.T) {
	const extra = `"zeta":1,"mid":2,"alpha":3,"omega":4`
	named := func(err error) string {
		var ve *domain.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("want a validation error, got %v", err)
		}
		return ve.Field
	}
	for range 20 {
		_, err := parseSubmit([]byte(`{"module":"core.echo","input":{},"config":{},` + extra + `}`))
		if f := named(err); f != "alpha" {
			t.Fatalf("submit: refusal names %q, want alpha", f)
		}
		r := httptest.NewRequest("POST", "/v1/sdk/tasks/poll", strings.NewReader(`{"max":1,`+extra+`}`))
		_, err = taskFields(r, "modules", "max", "waitMs", "workerId")
		if f := named(err); f != "alpha" {
			t.Fatalf("tasks: refusal names %q, want alpha", f)
		}
	}
	if _, err := parseSubmit([]byte(`{"module":"core.echo","input":{},"config":{},"":1,"alpha":1}`)); named(err) != "body" {
		t.Fatalf("a field with an empty name: %v, want the body named", err)
	}
}

// Input and config must be JSON objects, and are kept compacted; anything else is refused
// naming the field.
func TestSubmitInputAndConfigMustBeObjects(t *testing.T) {
	for _, v := range []string{`[1]`, `[]`, `"x"`, `1`, `true`, `false`, `"{}"`} {
		for _, field := range []string{"input", "config"} {
			other := map[string]string{"input": "config", "config": "input"}[field]
			body := `{"module":"core.echo","` + other + `":{},"` + field + `":` + v + `}`
			_, err := parseSubmit([]byte(body))
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != field {
				t.Errorf("%s %s: %v, want a 400 naming %s", field, v, err, field)
			}
		}
	}
	req, err := parseSubmit([]byte(`{"module":"core.echo","input": { "a" : [ 1, 2 ] } ,"config":	{ }}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(req.Input) != `{"a":[1,2]}` || string(req.Config) != `{}` {
		t.Fatalf("input %s, config %s: want them compacted", req.Input, req.Config)
	}
}
