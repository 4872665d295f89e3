package modules_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/modules"
)

func TestConditionCompileAndEval(t *testing.T) {
	for _, tc := range []struct {
		src, output, trigger string
		want                 bool
		evalErr              bool
	}{
		{`output.score > 0.5`, `{"score": 0.9}`, `{}`, true, false},
		{`output.score > 0.5`, `{"score": 0.1}`, `{}`, false, false},
		{`trigger.kind == "vip" && output.ok`, `{"ok": true}`, `{"kind": "vip"}`, true, false},
		{`trigger.kind == "vip"`, `null`, `{"kind": "basic"}`, false, false},
		{`all(output.items, # > 1)`, `{"items": [2, 3]}`, `{}`, true, false},
		{`output.missing > 3`, `{}`, `{}`, false, true},
	} {
		c, err := modules.CompileCondition(tc.src)
		if err != nil {
			t.Fatalf("%s: compile: %v", tc.src, err)
		}
		got, err := c.Eval(context.Background(), json.RawMessage(tc.output), json.RawMessage(tc.trigger))
		if (err != nil) != tc.evalErr || got != tc.want {
			t.Errorf("%s over %s, %s = %v, %v; want %v (error %v)", tc.src, tc.output, tc.trigger, got, err, tc.want, tc.evalErr)
		}
	}
}

func TestConditionCompileErrors(t *testing.T) {
	for _, src := range []string{`output.score >`, `1 + 2`, `"text"`} {
		_, err := modules.CompileCondition(src)
		var ve *modules.ValidationError
		if !errors.As(err, &ve) || ve.Field != "when" || !strings.Contains(ve.Message, "expression error") {
			t.Errorf("%s: got %v, want a validation error of when", src, err)
		}
	}
}

func TestConditionStopsAtItsDeadline(t *testing.T) {
	c, err := modules.CompileCondition(`all(1..100000, {all(1..100000, {# > 0})})`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Eval(ctx, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the context's error", err)
	}
}
