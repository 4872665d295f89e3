package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/itchyny/gojq"
)

// MaxJQResults bounds the number of results json.jq collects.
const MaxJQResults = 10000

func jqModule() Module {
	return mustModule(Definition{
		Name: "json.jq",
		Description: "Applies a jq program (config.query) to the input. Output is the single result, " +
			"null for none, or an array of all results when there are several (always an array with config.all).",
		CostMilli: 1500,
		ConfigSchema: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["query"],
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 10000, "description": "A jq program, e.g. \".items | map(.price) | add\"."},
    "all": {"type": "boolean", "default": false, "description": "Always return an array of all results."}
  }
}`),
		InputSchema: json.RawMessage(anyObject),
		Timeout:     5 * time.Second,
		CheckConfig: func(config json.RawMessage) error {
			var cfg jqConfig
			if err := decode(config, &cfg); err != nil {
				return invalid("config", "%v", err)
			}
			_, err := compileJQ(cfg.Query)
			return err
		},
		Run: runJQ,
	})
}

type jqConfig struct {
	Query string `json:"query"`
	All   bool   `json:"all"`
}

// compileJQ parses and compiles json.jq's query (CompileJQ), naming config.query.
func compileJQ(src string) (*gojq.Code, error) {
	code, err := CompileJQ(src)
	if err != nil {
		return nil, invalid("config.query", "%v", err)
	}
	return code, nil
}

// CompileJQ parses and compiles a jq program with no environment ($ENV and env are empty), no
// module loading and no input/inputs: json.jq's query, and an ON_WEBHOOK component's
// transform. The error says what does not compile, naming no field.
func CompileJQ(src string) (*gojq.Code, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("jq syntax error at offset %d: %w", pe.Offset, err)
		}
		return nil, fmt.Errorf("jq syntax error: %w", err)
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, fmt.Errorf("jq compile error: %w", err)
	}
	return code, nil
}

func runJQ(ctx context.Context, call Call) (json.RawMessage, error) {
	var cfg jqConfig
	if err := decode(call.Config, &cfg); err != nil {
		return nil, err
	}
	code, err := compileJQ(cfg.Query)
	if err != nil {
		return nil, Fail(CodeInvalidRequest, "%v", err)
	}
	in, err := decodeValue(call.Input, true)
	if err != nil {
		return nil, Fail(CodeInvalidRequest, "input: %v", err)
	}
	results := []any{}
	iter := code.RunWithContext(ctx, in)
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := v.(error); isErr {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break // plain `halt`: stop with the results so far
			}
			return nil, Fail(CodeEvaluation, "jq: %v", err)
		}
		if len(results) == MaxJQResults {
			return nil, Fail(CodeOutputTooLarge, "jq: the program produced more than %d results", MaxJQResults)
		}
		results = append(results, v)
	}
	var out any
	switch {
	case cfg.All || len(results) > 1:
		out = results
	case len(results) == 1:
		out = results[0]
	}
	b, err := gojq.Marshal(out)
	if err != nil {
		return nil, Fail(CodeEvaluation, "jq: %v", err)
	}
	return capOutput("json.jq", b, MaxOutputBytes)
}
