package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// MaxTemplateBytes bounds text.template's config.template.
const MaxTemplateBytes = 64 << 10

func templateModule() Module {
	return mustModule(Definition{
		Name: "text.template",
		Description: "Renders a Go text/template (config.template) with the input as data; " +
			`output {"text": "..."} of at most 1 MiB.`,
		CostMilli: 1500,
		ConfigSchema: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["template"],
  "properties": {
    "template": {"type": "string", "maxLength": 65536, "description": "A Go text/template; the input object is the data (dot)."},
    "strict": {"type": "boolean", "default": false, "description": "Fail on a missing map key instead of printing \"<no value>\"."}
  }
}`),
		InputSchema: json.RawMessage(anyObject),
		Timeout:     5 * time.Second,
		CheckConfig: func(config json.RawMessage) error {
			var cfg templateConfig
			if err := decode(config, &cfg); err != nil {
				return invalid("config", "%v", err)
			}
			_, err := parseTemplate(cfg)
			return err
		},
		Run: runTemplate,
	})
}

type templateConfig struct {
	Template string `json:"template"`
	Strict   bool   `json:"strict"`
}

// templateFuncs extends text/template's own (pure) built-ins with a few
// string helpers. None of them does I/O.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"upper":     strings.ToUpper,
	"lower":     strings.ToLower,
	"trim":      strings.TrimSpace,
	"contains":  func(substr, s string) bool { return strings.Contains(s, substr) },
	"hasPrefix": func(prefix, s string) bool { return strings.HasPrefix(s, prefix) },
	"hasSuffix": func(suffix, s string) bool { return strings.HasSuffix(s, suffix) },
	"replace":   func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
	"split":     func(sep, s string) []string { return strings.Split(s, sep) },
	"join": func(sep string, items any) (string, error) {
		switch l := items.(type) {
		case []string:
			return strings.Join(l, sep), nil
		case []any:
			parts := make([]string, len(l))
			for i, it := range l {
				parts[i] = fmt.Sprint(it)
			}
			return strings.Join(parts, sep), nil
		case nil:
			return "", nil
		}
		return "", fmt.Errorf("join: cannot join %T", items)
	},
	"default": func(def, v any) any {
		if v == nil || v == "" {
			return def
		}
		return v
	},
}

func parseTemplate(cfg templateConfig) (*template.Template, error) {
	t := template.New("template").Funcs(templateFuncs)
	if cfg.Strict {
		t = t.Option("missingkey=error")
	}
	t, err := t.Parse(cfg.Template)
	if err != nil {
		return nil, invalid("config.template", "template syntax error: %s", templateErr(err))
	}
	for _, tt := range t.Templates() {
		if tt.Tree == nil {
			continue
		}
		if n := findIntegerRange(tt.Tree.Root); n != nil {
			return nil, invalid("config.template", "range over an integer literal is not allowed (at %q)", n.String())
		}
	}
	return t, nil
}

// findIntegerRange finds {{range N}} with N a number literal: an empty loop
// body never writes, so it could spin long after the deadline. Numbers in the
// input are decoded as float64, which range refuses.
func findIntegerRange(n parse.Node) parse.Node {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return nil
		}
		for _, c := range x.Nodes {
			if r := findIntegerRange(c); r != nil {
				return r
			}
		}
	case *parse.RangeNode:
		if p := x.Pipe; p != nil && len(p.Cmds) > 0 {
			last := p.Cmds[len(p.Cmds)-1]
			if len(last.Args) == 1 {
				if _, ok := last.Args[0].(*parse.NumberNode); ok {
					return x
				}
			}
		}
		if r := findIntegerRange(x.List); r != nil {
			return r
		}
		return findIntegerRange(x.ElseList)
	case *parse.IfNode:
		if r := findIntegerRange(x.List); r != nil {
			return r
		}
		return findIntegerRange(x.ElseList)
	case *parse.WithNode:
		if r := findIntegerRange(x.List); r != nil {
			return r
		}
		return findIntegerRange(x.ElseList)
	}
	return nil
}

// limitedWriter fails once more than limit bytes are written or ctx ends,
// which stops template execution.
type limitedWriter struct {
	ctx   context.Context
	b     strings.Builder
	limit int
}

var errOutputTooLarge = errors.New("output too large")

func (w *limitedWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if w.b.Len()+len(p) > w.limit {
		return 0, errOutputTooLarge
	}
	return w.b.Write(p)
}

func runTemplate(ctx context.Context, call Call) (json.RawMessage, error) {
	var cfg templateConfig
	if err := decode(call.Config, &cfg); err != nil {
		return nil, err
	}
	t, err := parseTemplate(cfg)
	if err != nil {
		return nil, Fail(CodeInvalidRequest, "%v", err)
	}
	data, err := decodeValue(call.Input, false)
	if err != nil {
		return nil, Fail(CodeInvalidRequest, "input: %v", err)
	}
	addDeadlineChecks(ctx, t)
	return runIsolated(ctx, "text.template", func() (json.RawMessage, error) {
		w := &limitedWriter{ctx: ctx, limit: MaxOutputBytes}
		if err := t.Execute(w, data); err != nil {
			switch {
			case errors.Is(err, errOutputTooLarge):
				return nil, &Failure{
					Code:    CodeOutputTooLarge,
					Message: fmt.Sprintf("text.template: output is larger than %d bytes", MaxOutputBytes),
					Details: map[string]int{"limitBytes": MaxOutputBytes},
				}
			case ctx.Err() != nil:
				return nil, ctx.Err()
			}
			return nil, Fail(CodeEvaluation, "template: %s", templateErr(err))
		}
		return json.Marshal(map[string]string{"text": w.b.String()})
	})
}

// stepFunc is the name of the function addDeadlineChecks calls. A template
// that calls it itself only adds a check.
const stepFunc = "_switchyard_step"

// addDeadlineChecks makes t stop once ctx ends, however it loops:
// text/template takes no context and a loop that writes nothing never
// reaches the writer's check. Repetition in a template comes only from range
// iterations and template invocations (recursion included), so a call to a
// function that fails once ctx has ended is put first in every range body and
// every template body; between two checks runs at most one pass over a body
// without loops, bounded by the template's size.
func addDeadlineChecks(ctx context.Context, t *template.Template) {
	t.Funcs(template.FuncMap{stepFunc: func() (string, error) { return "", ctx.Err() }})
	for _, tt := range t.Templates() {
		if tt.Tree != nil && tt.Tree.Root != nil {
			insertChecks(tt.Tree.Root, stepCheck)
			prepend(tt.Tree.Root, stepCheck)
		}
	}
}

// stepCheck is the {{_switchyard_step}} action that addDeadlineChecks copies
// into a template, parsed so that it is a node the parser built.
var stepCheck = func() parse.Node {
	trees, err := parse.Parse("step", "{{"+stepFunc+"}}", "", "", map[string]any{stepFunc: func() string { return "" }})
	if err != nil {
		panic(err)
	}
	return trees["step"].Root.Nodes[0]
}()

func prepend(l *parse.ListNode, check parse.Node) {
	l.Nodes = append([]parse.Node{check.Copy()}, l.Nodes...)
}

// insertChecks puts a check first in the body of every range under n.
func insertChecks(n parse.Node, check parse.Node) {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, c := range x.Nodes {
			insertChecks(c, check)
		}
	case *parse.RangeNode:
		insertChecks(x.List, check)
		insertChecks(x.ElseList, check)
		if x.List != nil {
			prepend(x.List, check)
		}
	case *parse.IfNode:
		insertChecks(x.List, check)
		insertChecks(x.ElseList, check)
	case *parse.WithNode:
		insertChecks(x.List, check)
		insertChecks(x.ElseList, check)
	}
}

// templateErr turns "template: template:1:2: msg" into "line 1:2: msg".
func templateErr(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "template: template:"); ok {
		return "line " + rest
	}
	return strings.TrimPrefix(msg, "template: ")
}
