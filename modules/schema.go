package modules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var schemaPrinter = message.NewPrinter(language.English)

// compileSchema compiles a JSON Schema document (draft 2020-12 unless the
// document says otherwise). The compiler loads nothing from the network or
// the filesystem: every schema must be self-contained.
func compileSchema(id string, doc json.RawMessage) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", id, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	url := "urn:switchyard:modules:" + id
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("schema %s: %w", id, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", id, err)
	}
	return s, nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s: external schema references are not allowed", url)
}

// parseJSON decodes raw (which must be present and a single JSON value) for
// schema validation; root names the field ("config" or "input").
func parseJSON(root string, raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, invalid(root, "is required")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid(root, "is not valid JSON: %v", err)
	}
	return v, nil
}

// checkSchema validates raw against s and maps the most specific error to a
// *ValidationError whose Field is root plus the instance location.
func checkSchema(root string, s *jsonschema.Schema, raw json.RawMessage) error {
	v, err := parseJSON(root, raw)
	if err != nil {
		return err
	}
	err = s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return invalid(root, "%v", err)
	}
	return schemaValidationError(root, ve)
}

func schemaValidationError(root string, ve *jsonschema.ValidationError) *ValidationError {
	leaf := deepestLeaf(ve)
	path := append([]string(nil), leaf.InstanceLocation...)
	var msg string
	switch k := leaf.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			path = append(path, k.Missing[0])
		}
		msg = "is required"
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			path = append(path, k.Properties[0])
		}
		msg = "is not a known field"
	case *kind.Type:
		msg = fmt.Sprintf("must be %s, got %s", withArticle(strings.Join(k.Want, " or ")), k.Got)
	case *kind.Minimum:
		msg = fmt.Sprintf("must be at least %s", k.Want.RatString())
	case *kind.Maximum:
		msg = fmt.Sprintf("must be at most %s", k.Want.RatString())
	case *kind.MinLength:
		if k.Want == 1 {
			msg = "must not be empty"
		} else {
			msg = fmt.Sprintf("must be at least %d characters long", k.Want)
		}
	case *kind.MaxLength:
		msg = fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.MinProperties:
		msg = fmt.Sprintf("must have at least %d entries", k.Want)
	case *kind.MaxProperties:
		msg = fmt.Sprintf("must have at most %d entries", k.Want)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			b, _ := json.Marshal(w)
			want[i] = string(b)
		}
		msg = "must be one of " + strings.Join(want, ", ")
	default:
		msg = leaf.ErrorKind.LocalizedString(schemaPrinter)
	}
	field := root
	for _, p := range path {
		field += "." + p
	}
	return &ValidationError{Field: field, Message: msg}
}

// deepestLeaf returns the first leaf error with the longest instance
// location: the most specific complaint.
func deepestLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return e
	}
	var best *jsonschema.ValidationError
	for _, c := range e.Causes {
		l := deepestLeaf(c)
		if best == nil || len(l.InstanceLocation) > len(best.InstanceLocation) {
			best = l
		}
	}
	return best
}

func withArticle(s string) string {
	switch {
	case s == "":
		return s
	case strings.ContainsRune("aeiou", rune(s[0])):
		return "an " + s
	default:
		return "a " + s
	}
}
