package modules

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// ConditionTimeout bounds one evaluation of a condition: it runs on the scheduler's path, not
// in an executor slot, so it gets far less time than an expr.eval execution.
const ConditionTimeout = 100 * time.Millisecond

// conditionCtx is the variable through which a condition's deadline checks reach the context
// of one evaluation: the program is compiled once and shared, so the context cannot be baked
// into its functions as expr.eval's per-run programs do.
const conditionCtx = "$__ctx"

// Condition is a compiled workflow edge condition (an edge's `when`): an expression in
// expr.eval's language over `output` and `trigger` that yields a boolean.
type Condition struct{ prog *vm.Program }

// CompileCondition compiles src once; an error is a *ValidationError whose Field is "when".
func CompileCondition(src string) (*Condition, error) {
	p, err := expr.Compile(src,
		expr.Env(map[string]any{}),
		expr.AllowUndefinedVariables(),
		expr.MaxNodes(10000),
		expr.AsBool(),
		expr.Function(stepFunc, func(params ...any) (any, error) {
			if ctx, ok := params[0].(context.Context); ok && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return params[1], nil
		}, new(func(any, any) any)),
		expr.Patch(conditionCheck{}))
	if err != nil {
		return nil, invalid("when", "expression error: %s", firstLine(err.Error()))
	}
	return &Condition{prog: p}, nil
}

// conditionCheck wraps every predicate body in a call of stepFunc with the evaluation's
// context, as deadlineChecks does for expr.eval.
type conditionCheck struct{}

func (conditionCheck) Visit(node *ast.Node) {
	if p, ok := (*node).(*ast.PredicateNode); ok {
		call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: stepFunc},
			Arguments: []ast.Node{&ast.IdentifierNode{Value: conditionCtx}, p.Node}}
		ast.Patch(&p.Node, call)
	}
}

// Eval evaluates the condition over an upstream output and a trigger body, within
// ConditionTimeout. A result other than a boolean, or a run-time error, is an error.
func (c *Condition) Eval(ctx context.Context, output, trigger json.RawMessage) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, ConditionTimeout)
	defer cancel()
	env := map[string]any{conditionCtx: ctx}
	for name, raw := range map[string]json.RawMessage{"output": output, "trigger": trigger} {
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		v, err := decodeValue(raw, true)
		if err != nil {
			return false, fmt.Errorf("condition: %s: %w", name, err)
		}
		env[name] = v
	}
	out, err := runIsolated(ctx, "condition", func() (json.RawMessage, error) {
		res, err := expr.Run(c.prog, env)
		if err != nil {
			return nil, fmt.Errorf("condition: %s", firstLine(err.Error()))
		}
		if b, ok := res.(bool); ok && b {
			return json.RawMessage("true"), nil
		}
		return json.RawMessage("false"), nil
	})
	if err != nil {
		return false, err
	}
	return string(out) == "true", nil
}
