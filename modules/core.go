package modules

import (
	"context"
	"encoding/json"
	"time"
)

const anyObject = `{"type": "object", "description": "Any JSON object."}`

func echoModule() Module {
	return mustModule(Definition{
		Name:         "core.echo",
		Description:  "Returns its input unchanged.",
		CostMilli:    1000,
		ConfigSchema: json.RawMessage(`{"type": "object", "additionalProperties": false, "description": "No options."}`),
		InputSchema:  json.RawMessage(anyObject),
		Timeout:      5 * time.Second,
		Run: func(ctx context.Context, call Call) (json.RawMessage, error) {
			return call.Input, nil
		},
	})
}

// MaxDelayMs bounds core.delay's config.ms.
const MaxDelayMs = 10000

func delayModule() Module {
	return mustModule(Definition{
		Name:        "core.delay",
		Description: "Waits config.ms milliseconds (at most 10000), then returns its input unchanged.",
		CostMilli:   1000,
		ConfigSchema: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["ms"],
  "properties": {
    "ms": {"type": "integer", "minimum": 0, "maximum": 10000, "description": "Milliseconds to wait."}
  }
}`),
		InputSchema: json.RawMessage(anyObject),
		Timeout:     15 * time.Second,
		Run: func(ctx context.Context, call Call) (json.RawMessage, error) {
			var cfg struct {
				Ms int64 `json:"ms"`
			}
			if err := decode(call.Config, &cfg); err != nil {
				return nil, err
			}
			t := time.NewTimer(time.Duration(cfg.Ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return call.Input, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
}

func failModule() Module {
	return mustModule(Definition{
		Name: "core.fail",
		Description: "Fails with config.message and config.code; with config.succeedOnAttempt N, " +
			"attempts N and later succeed and return the input (for testing retries).",
		CostMilli: 1000,
		ConfigSchema: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "message": {"type": "string", "minLength": 1, "maxLength": 1000, "default": "failed", "description": "The failure message."},
    "code": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$", "maxLength": 100, "default": "failed", "description": "The failure code."},
    "details": {"description": "Any JSON value, returned as the failure's details."},
    "succeedOnAttempt": {"type": "integer", "minimum": 1, "maximum": 100, "description": "From this attempt on, succeed and return the input."}
  }
}`),
		InputSchema: json.RawMessage(anyObject),
		Timeout:     5 * time.Second,
		Run: func(ctx context.Context, call Call) (json.RawMessage, error) {
			var cfg struct {
				Message          string          `json:"message"`
				Code             string          `json:"code"`
				Details          json.RawMessage `json:"details"`
				SucceedOnAttempt int             `json:"succeedOnAttempt"`
			}
			if err := decode(call.Config, &cfg); err != nil {
				return nil, err
			}
			attempt := max(call.Attempt, 1)
			if cfg.SucceedOnAttempt > 0 && attempt >= cfg.SucceedOnAttempt {
				return call.Input, nil
			}
			f := &Failure{Message: cfg.Message, Code: cfg.Code}
			if f.Message == "" {
				f.Message = "failed"
			}
			if f.Code == "" {
				f.Code = CodeFailed
			}
			if len(cfg.Details) > 0 && string(cfg.Details) != "null" {
				f.Details = cfg.Details
			}
			return nil, f
		},
	})
}
