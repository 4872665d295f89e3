package modules

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// PayloadExpression is a compiled expression in expr.eval's language over a payload (a
// trigger body, an event): the payload's top-level fields are variables, and the whole is
// `payload`. A workflow's concurrency key is one; event filters and debounce keys are others.
type PayloadExpression struct{ prog *vm.Program }

// CompilePayloadExpression compiles src once; an error is a *ValidationError whose Field is
// field.
func CompilePayloadExpression(field, src string) (*PayloadExpression, error) {
	p, err := expr.Compile(src,
		expr.Env(map[string]any{}),
		expr.AllowUndefinedVariables(),
		expr.MaxNodes(10000),
		expr.Function(stepFunc, func(params ...any) (any, error) {
			if ctx, ok := params[0].(context.Context); ok && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return params[1], nil
		}, new(func(any, any) any)),
		expr.Patch(conditionCheck{}))
	if err != nil {
		return nil, invalid(field, "expression error: %s", firstLine(err.Error()))
	}
	return &PayloadExpression{prog: p}, nil
}

// Eval evaluates the expression over payload within ConditionTimeout (it runs on a request's
// or the scheduler's path) and returns its result as JSON. A run-time error, or a result that
// is not JSON (a function), is an error.
func (p *PayloadExpression) Eval(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, ConditionTimeout)
	defer cancel()
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	v, err := decodeValue(payload, true)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	env := map[string]any{}
	if fields, ok := v.(map[string]any); ok {
		for name, f := range fields {
			env[name] = f
		}
	}
	env["payload"], env[conditionCtx] = v, ctx
	return runIsolated(ctx, "expression", func() (json.RawMessage, error) {
		res, err := expr.Run(p.prog, env)
		if err != nil {
			return nil, fmt.Errorf("expression: %s", firstLine(err.Error()))
		}
		out, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("expression: the result is not JSON: %w", err)
		}
		return out, nil
	})
}
