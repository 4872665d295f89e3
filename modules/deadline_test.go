package modules

import (
	"fmt"

	"context"
	"encoding/json"
	"github.com/expr-lang/expr"
	"testing"
	"time"
)

// TestRunawayEvaluationStopsAtDeadline runs programs that would compute for
// minutes or forever and checks that, once the run's deadline has passed, the
// evaluation itself (not just Registry.Run) has returned: an abandoned
// evaluation would keep a core busy for nothing (issue 14.1).
func TestRunawayEvaluationStopsAtDeadline(t *testing.T) {
	items := make([]int, 1000)
	big, _ := json.Marshal(map[string]any{"a": items})
	tests := []struct {
		name, module, config, input string
	}{
		{"template nested integer range", "text.template", `{"template": "{{$n := 60000}}{{range $n}}{{range $n}}{{end}}{{end}}done"}`, `{}`},
		{"template nested input range", "text.template", `{"template": "{{range .a}}{{range $.a}}{{range $.a}}{{end}}{{end}}{{end}}"}`, string(big)},
		// Two calls a level, 40 levels deep: 2^40 calls, and far from text/template's depth limit,
		// which an unbounded recursion reaches before the deadline on a fast machine.
		{"template exponential recursion", "text.template", `{"template": "{{define \"r\"}}{{if lt (len .) 40}}{{template \"r\" (printf \"%s.\" .)}}{{template \"r\" (printf \"%s.\" .)}}{{end}}{{end}}{{template \"r\" \"\"}}"}`, `{}`},
		{"expr nested all", "expr.eval", `{"expression": "all(a, {all(a, {all(a, {true})})})"}`, string(big)},
		{"expr nested reduce", "expr.eval", `{"expression": "reduce(a, reduce(a, reduce(a, #acc + 1, 0), 0), 0)"}`, string(big)},
		{"jq endless reduce", "json.jq", `{"query": "reduce range(1e15) as $x (0; . + 1)"}`, `{}`},
		{"jq endless last", "json.jq", `{"query": "last(range(1e15))"}`, `{}`},
	}
	r := Builtins(BuiltinsConfig{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := r.Run(ctx, tt.module, Call{Config: obj(tt.config), Input: obj(tt.input)})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Registry.Run did not return long after its deadline")
			}
			f, ok := AsFailure(err)
			if !ok || f.Code != CodeTimeout {
				t.Fatalf("Run error = %v, want a %s failure", err, CodeTimeout)
			}
			// The evaluation must have stopped, not merely been abandoned.
			waitUntil(t, 10*time.Second, "the abandoned evaluation to return", func() bool { return evaluationsRunning() == 0 })
		})
	}
}

// TestTemplateStepCheckIsInvisible checks that the deadline checks put into a
// template change nothing in its output, whitespace trimming included.
func TestTemplateStepCheckIsInvisible(t *testing.T) {
	r := Builtins(BuiltinsConfig{})
	out, err := r.Run(context.Background(), "text.template", Call{
		Config: obj(`{"template": "{{define \"x\"}}[{{.}}]{{end}}{{range $i, $v := .a -}} {{$i}}:{{template \"x\" $v}} {{- end}}{{range .none}}no{{else}}|empty{{end}}"}`),
		Input:  obj(`{"a": ["p", "q"]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"text":"0:[p]1:[q]|empty"}`; string(out) != want {
		t.Fatalf("output = %s, want %s", out, want)
	}
}

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExprStepCheckIsInvisible checks that wrapping predicates in deadline
// checks changes no result of the builtins that take one.
func TestExprStepCheckIsInvisible(t *testing.T) {
	env := map[string]any{"a": []any{3.0, 1.0, 2.0}, "s": []any{"b", "a"}}
	for _, src := range []string{
		`all(a, {# > 0})`, `any(a, # > 2)`, `one(a, # == 1)`, `none(a, # > 5)`,
		`map(a, # * 2)`, `filter(a, # > 1)`, `count(a, # > 1)`, `sum(a, # * 2)`,
		`find(a, # < 3)`, `findIndex(a, # == 2)`, `findLast(a, # > 0)`, `findLastIndex(a, # > 0)`,
		`sortBy(a, #)`, `sortBy(s, #, "desc")`, `groupBy(a, # > 1)`, `reduce(a, #acc + #, 0)`,
		`map(a, {map(s, {# + "x"})})`, `filter(s, {# == "a"})[0]`, `1..3 | map(# * #)`,
	} {
		plain, err := compileExpr(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		checked, err := compileExpr(src, deadlineChecks(context.Background())...)
		if err != nil {
			t.Fatalf("%s with checks: %v", src, err)
		}
		want, err := expr.Run(plain, env)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := expr.Run(checked, env)
		if err != nil {
			t.Fatalf("%s with checks: %v", src, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v with checks, %v without", src, got, want)
		}
	}
}
