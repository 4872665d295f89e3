package modules

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// PayloadExpr is a compiled expression over a JSON payload (an event's filter, a debounce's
// key): in expr.eval's language, as an edge's `when` is, with the payload's top-level fields
// as variables and the whole payload as `payload`.
type PayloadExpr struct{ prog *vm.Program }

// CompilePayloadFilter compiles an expression that must yield a boolean; an error is a
// *ValidationError whose Field is "when" (the caller names its own field).
func CompilePayloadFilter(src string) (*PayloadExpr, error) { return compilePayload(src, true) }

// CompilePayloadValue compiles an expression that may yield any value (a debounce's key).
func CompilePayloadValue(src string) (*PayloadExpr, error) { return compilePayload(src, false) }

func compilePayload(src string, asBool bool) (*PayloadExpr, error) {
	opts := []expr.Option{
		expr.Env(map[string]any{}),
		expr.AllowUndefinedVariables(),
		expr.MaxNodes(10000),
		expr.Function(stepFunc, func(params ...any) (any, error) {
			if ctx, ok := params[0].(context.Context); ok && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return params[1], nil
		}, new(func(any, any) any)),
		expr.Patch(conditionCheck{}),
	}
	if asBool {
		opts = append(opts, expr.AsBool())
	}
	p, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, invalid("when", "expression error: %s", firstLine(err.Error()))
	}
	return &PayloadExpr{prog: p}, nil
}

// payloadEnv is the variables of an evaluation over payload.
func payloadEnv(ctx context.Context, payload json.RawMessage) (map[string]any, error) {
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	v, err := decodeValue(payload, true)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	env := map[string]any{}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			env[k] = x
		}
	}
	env["payload"] = v
	env[conditionCtx] = ctx
	return env, nil
}

// Holds evaluates a filter over payload within ConditionTimeout. A result other than true, or
// a run-time error, is false with the error.
func (e *PayloadExpr) Holds(ctx context.Context, payload json.RawMessage) (bool, error) {
	out, err := e.Value(ctx, payload)
	if err != nil {
		return false, err
	}
	return string(out) == "true", nil
}

// Value evaluates the expression over payload within ConditionTimeout and gives its result as
// JSON (object keys sorted, so equal values give equal text).
func (e *PayloadExpr) Value(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, ConditionTimeout)
	defer cancel()
	env, err := payloadEnv(ctx, payload)
	if err != nil {
		return nil, err
	}
	return runIsolated(ctx, "expression", func() (json.RawMessage, error) {
		res, err := expr.Run(e.prog, env)
		if err != nil {
			return nil, fmt.Errorf("expression: %s", firstLine(err.Error()))
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("expression: result is not JSON: %w", err)
		}
		return b, nil
	})
}
