package modules

import (
	"encoding/json"
	"errors"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schemas are the compiled JSON Schemas of a workspace module (issue 28): the user's code
// runs elsewhere (a worker, an HTTP endpoint), but its config and input are checked here, at
// submit and when a workflow using it is saved, with the same errors as a built-in's, and its
// output when a worker reports it.
type Schemas struct {
	config, input, output *jsonschema.Schema
}

// CompileSchemas compiles a workspace module's schemas; a nil or empty config or input schema
// is {"type": "object"} as for built-ins, and a nil output schema accepts any output. A schema
// that does not compile is a *ValidationError naming its field (configSchema, inputSchema,
// outputSchema).
func CompileSchemas(name string, config, input, output json.RawMessage) (*Schemas, error) {
	var s Schemas
	for _, c := range []struct {
		field string
		doc   json.RawMessage
		into  **jsonschema.Schema
		def   json.RawMessage
	}{
		{"configSchema", config, &s.config, defaultSchema},
		{"inputSchema", input, &s.input, defaultSchema},
		{"outputSchema", output, &s.output, json.RawMessage(`true`)},
	} {
		doc := c.doc
		if len(doc) == 0 {
			doc = c.def
		}
		compiled, err := compileSchema(name+":"+c.field, doc)
		if err != nil {
			return nil, invalid(c.field, "is not a valid JSON Schema: %v", errors.Unwrap(err))
		}
		*c.into = compiled
	}
	return &s, nil
}

// ValidateConfig checks config alone, as a workflow definition is checked before any input
// exists.
func (s *Schemas) ValidateConfig(config json.RawMessage) error {
	return checkSchema("config", s.config, config)
}

// Validate checks config and input, as a submit is.
func (s *Schemas) Validate(config, input json.RawMessage) error {
	if err := s.ValidateConfig(config); err != nil {
		return err
	}
	return checkSchema("input", s.input, input)
}

// ValidateOutput checks what the user's code answered; the error names the field under
// "output".
func (s *Schemas) ValidateOutput(output json.RawMessage) error {
	return checkSchema("output", s.output, output)
}
