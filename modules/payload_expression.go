package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// PayloadExpression is a compiled expression in expr.eval's language over a payload (a
// trigger body, an event): the payload's top-level fields are variables, and the whole is
// `payload`. A workflow's concurrency key is one; a WAIT's until, event filters and debounce
// keys are others.
type PayloadExpression struct{ prog *vm.Program }

// CompilePayloadExpression compiles src once; an error is a *ValidationError whose Field is
// field.
func CompilePayloadExpression(field, src string) (*PayloadExpression, error) {
	return compilePayload(field, src)
}

// CompilePayloadFilter is CompilePayloadExpression for an expression that must yield a
// boolean (an event trigger's filter): one that cannot is refused when compiled.
func CompilePayloadFilter(field, src string) (*PayloadExpression, error) {
	return compilePayload(field, src, expr.AsBool())
}

func compilePayload(field, src string, more ...expr.Option) (*PayloadExpression, error) {
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
	p, err := expr.Compile(src, append(opts, more...)...)
	if err != nil {
		return nil, invalid(field, "expression error: %s", firstLine(err.Error()))
	}
	return &PayloadExpression{prog: p}, nil
}

// PayloadExpressionTimeout bounds one evaluation off a request's path. Longer than
// ConditionTimeout: a WAIT's until is evaluated once per stage, and a timeout only delays the
// wait to the next step.
const PayloadExpressionTimeout = time.Second

// Eval evaluates the expression over payload within ConditionTimeout (it runs on a request's
// or the scheduler's path) and returns its result as JSON. A run-time error, or a result that
// is not JSON (a function), is an error.
func (x *PayloadExpression) Eval(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	res, err := x.value(ctx, payload, ConditionTimeout)
	if err != nil {
		return nil, fmt.Errorf("expression: %w", err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("expression: the result is not JSON: %w", err)
	}
	return out, nil
}

// value evaluates the expression over payload within timeout.
func (x *PayloadExpression) value(ctx context.Context, payload json.RawMessage, timeout time.Duration) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	whole, err := decodeValue(payload, true)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	env := map[string]any{}
	if obj, ok := whole.(map[string]any); ok {
		for k, v := range obj {
			env[k] = v
		}
	}
	env["payload"], env[conditionCtx] = whole, ctx
	var res any
	_, err = runIsolated(ctx, "expression", func() (json.RawMessage, error) {
		var err error
		if res, err = expr.Run(x.prog, env); err != nil {
			return nil, errors.New(firstLine(err.Error()))
		}
		return nil, nil
	})
	if err != nil {
		return nil, err // res may still be written by an evaluation past its deadline
	}
	return res, nil
}

// Holds evaluates a filter over payload within ConditionTimeout: true only when it yields
// true; a run-time error is false with the error.
func (x *PayloadExpression) Holds(ctx context.Context, payload json.RawMessage) (bool, error) {
	out, err := x.Eval(ctx, payload)
	if err != nil {
		return false, err
	}
	return string(out) == "true", nil
}

// EvalTime evaluates the expression to a time, within PayloadExpressionTimeout: an RFC 3339
// string or a time value (now(), date(...)).
func (x *PayloadExpression) EvalTime(ctx context.Context, payload json.RawMessage) (time.Time, error) {
	v, err := x.value(ctx, payload, PayloadExpressionTimeout)
	if err != nil {
		return time.Time{}, err
	}
	switch t := v.(type) {
	case time.Time:
		return t, nil
	case string:
		parsed, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time", t)
		}
		return parsed, nil
	}
	return time.Time{}, fmt.Errorf("gave %T, not an RFC 3339 time", v)
}
