package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// FuzzDecodeDefinition feeds arbitrary bodies to the workflow definition decoder and then to
// the domain's Normalize and Validate, the path of every create and update. Seeds are in
// testdata/fuzz/FuzzDecodeDefinition.
//
// Properties: nothing panics; a decoding refusal is a *badBody with a message; a validation
// refusal is a *domain.ValidationError naming a field; every accepted position came as two
// JSON numbers; an accepted definition, encoded again, decodes to the same definition.
func FuzzDecodeDefinition(f *testing.F) {
	f.Add([]byte(`{"name":"w","components":[{"id":"t","module":"ON_API_CALLED","position":[0,0]},` +
		`{"id":"e","module":"core.echo","config":{},"position":[1.5,-2],"attempts":2}],"edges":[{"from":"t","to":"e"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := DecodeDefinition(body)
		if err != nil {
			var bad *badBody
			if !errors.As(err, &bad) || bad.msg == "" {
				t.Fatalf("decoding refusal is %T %q, want a *badBody with a message (body %q)", err, err, body)
			}
			return
		}
		checkPositionsWereNumbers(t, body)
		d.Normalize(fuzzIDs())
		if err := d.Validate(fuzzModuleCheck); err != nil {
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field == "" || ve.Message == "" {
				t.Fatalf("validation refusal is %T %q, want a *domain.ValidationError naming a field (body %q)", err, err, body)
			}
			return
		}
		again, err := DecodeDefinition(encodeAsSent(t, d))
		if err != nil {
			t.Fatalf("re-encoded accepted definition refused: %v (body %q)", err, body)
		}
		again.Normalize(fuzzIDs())
		if !reflect.DeepEqual(compactConfigs(again), compactConfigs(d)) {
			t.Fatalf("round trip changed the definition:\n got %#v\nwant %#v", again, d)
		}
	})
}

// fuzzModuleCheck stands in for the module registry: one known module taking any object.
func fuzzModuleCheck(module string, _ json.RawMessage) error {
	if module != "core.echo" {
		return domain.Invalid("module", "unknown module %q", module)
	}
	return nil
}

func fuzzIDs() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("gen-%d", n) }
}

// checkPositionsWereNumbers holds the decoder to SPEC.md 4.8: a position is two numbers, so
// null or a missing coordinate is refused rather than stored as 0.
func checkPositionsWereNumbers(t *testing.T, body []byte) {
	t.Helper()
	var raw struct {
		Components []struct {
			Position json.RawMessage `json:"position"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("decoder accepted %q, which encoding/json refuses: %v", body, err)
	}
	for i, c := range raw.Components {
		if c.Position == nil || string(c.Position) == "null" {
			continue // absent: the zero position, a documented default
		}
		var xs []json.RawMessage
		if json.Unmarshal(c.Position, &xs) != nil || len(xs) != 2 {
			t.Fatalf("components[%d].position %s accepted: not two items", i, c.Position)
		}
		for _, x := range xs {
			var n json.Number
			if json.Unmarshal(x, &n) != nil || string(bytes.TrimSpace(x)) == "null" {
				t.Fatalf("components[%d].position %s accepted: %s is not a number", i, c.Position, x)
			}
		}
	}
}

// compactConfigs makes configs that differ only in white space compare equal: encoding
// compacts a json.RawMessage.
func compactConfigs(d workflow.Definition) workflow.Definition {
	cs := make([]workflow.Component, len(d.Components))
	for i, c := range d.Components {
		var buf bytes.Buffer
		if json.Compact(&buf, c.Config) == nil {
			c.Config = buf.Bytes()
		}
		cs[i] = c
	}
	d.Components = cs
	return d
}
