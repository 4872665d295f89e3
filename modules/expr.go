package modules

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/expr-lang/expr"
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
func compileExpr(src string) (*vm.Program, error) {
	p, err := expr.Compile(src,
		expr.Env(map[string]any{}),
		expr.AllowUndefinedVariables(),
		expr.MaxNodes(10000),
	)
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
	p, err := compileExpr(cfg.Expression)
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

// firstLine drops expr's multi-line source excerpt from an error message; the
// first line already carries the (line:column) position.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}
