package modules

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

func exprModule() Module {
	return mustModule(Definition{
		Name: "expr.eval",
		Description: "Evaluates an expr-lang expression (config.expression) with the input object's fields as variables; " +
			`output {"result": ...}.`,
		CostMilli: 1500,
		ConfigSchema: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["expression"],
  "properties": {
    "expression": {"type": "string", "minLength": 1, "maxLength": 10000, "description": "An expr-lang expression, e.g. \"price * quantity > 100\"."}
  }
}`),
		InputSchema: json.RawMessage(anyObject),
		Timeout:     5 * time.Second,
		CheckConfig: func(config json.RawMessage) error {
			var cfg exprConfig
			if err := decode(config, &cfg); err != nil {
				return invalid("config", "%v", err)
			}
			_, err := compileExpr(cfg.Expression)
			return err
		},
		Run: runExpr,
	})
}

type exprConfig struct {
	Expression string `json:"expression"`
}

// compileExpr compiles an expression against a free-form map environment:
// any identifier is accepted and looked up in the input at run time (a
// missing one is nil).
func compileExpr(src string, extra ...expr.Option) (*vm.Program, error) {
	opts := append([]expr.Option{
		expr.Env(map[string]any{}),
		expr.AllowUndefinedVariables(),
		expr.MaxNodes(10000),
	}, extra...)
	p, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, invalid("config.expression", "expression error: %s", firstLine(err.Error()))
	}
	return p, nil
}

func runExpr(ctx context.Context, call Call) (json.RawMessage, error) {
	var cfg exprConfig
	if err := decode(call.Config, &cfg); err != nil {
		return nil, err
	}
	p, err := compileExpr(cfg.Expression, deadlineChecks(ctx)...)
	if err != nil {
		return nil, Fail(CodeInvalidRequest, "%v", err)
	}
	env, err := decodeValue(call.Input, true)
	if err != nil {
		return nil, Fail(CodeInvalidRequest, "input: %v", err)
	}
	if env == nil {
		env = map[string]any{}
	}
	return runIsolated(ctx, "expr.eval", func() (json.RawMessage, error) {
		// The VM's default memory budget bounds allocation-heavy loops.
		res, err := expr.Run(p, env)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, Fail(CodeEvaluation, "expression: %s", firstLine(err.Error()))
		}
		if f, ok := res.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return nil, Fail(CodeEvaluation, "expression: result %v is not representable in JSON", f)
		}
		b, err := json.Marshal(map[string]any{"result": res})
		if err != nil {
			return nil, Fail(CodeEvaluation, "expression: result is not representable in JSON: %v", err)
		}
		return capOutput("expr.eval", b, MaxOutputBytes)
	})
}

// deadlineChecks makes a program stop once ctx ends: expr's VM takes no
// context. Repetition in expr comes only from the builtins that run a
// predicate per element (all, map, filter, reduce, sortBy, ...), so every
// predicate's body is wrapped in a call that fails once ctx has ended, and
// between two checks runs at most one predicate body without loops. The
// wrapper returns its argument unchanged, typed any, which the checker accepts
// wherever a predicate's result may be of unknown type.
func deadlineChecks(ctx context.Context) []expr.Option {
	return []expr.Option{
		expr.Function(stepFunc, func(params ...any) (any, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return params[0], nil
		}, new(func(any) any)),
		expr.Patch(predicateCheck{}),
	}
}

// predicateCheck wraps every predicate body in a call of stepFunc.
type predicateCheck struct{}

func (predicateCheck) Visit(node *ast.Node) {
	if p, ok := (*node).(*ast.PredicateNode); ok {
		call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: stepFunc}, Arguments: []ast.Node{p.Node}}
		ast.Patch(&p.Node, call)
	}
}

// firstLine drops expr's multi-line source excerpt from an error message; the
// first line already carries the (line:column) position.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}
