package run_test

import (
	"encoding/json"
	"reflect"
	"testing"
)

func outputOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("output %s: %v", raw, err)
	}
	return m
}

// A run's output is null until it completed; then its leaves' outputs, a skipped leaf as null.
func TestRunOutputIsItsLeavesOnceCompleted(t *testing.T) {
	h := start(t, def(t, branches), `{"left": true, "right": false, "go": false}`)
	if got := string(h.s.Detail().Output); got != "null" {
		t.Fatalf("output before the end = %s, want null", got)
	}
	h.echoAll()
	if h.s.Status != "COMPLETED" {
		t.Fatalf("status %s", h.s.Status)
	}
	want := map[string]any{"j": map[string]any{"fromB": true}, "d": nil}
	if got := outputOf(t, h.s.Detail().Output); !reflect.DeepEqual(got, want) {
		t.Fatalf("output = %v, want %v", got, want)
	}
}

// A leaf inside a FOR_EACH body gives its iterations' outputs in item order.
func TestRunOutputOfALoopLeafIsTheIterationsInOrder(t *testing.T) {
	h := start(t, def(t, loop), `{"items": [10, 20, 30, 40]}`)
	h.echoAll()
	want := map[string]any{"work": []any{map[string]any{"n": 10.0}, map[string]any{"n": 20.0}, map[string]any{"n": 30.0}, map[string]any{"n": 40.0}}}
	if got := outputOf(t, h.s.Detail().Output); !reflect.DeepEqual(got, want) {
		t.Fatalf("output = %v, want %v", got, want)
	}
}
