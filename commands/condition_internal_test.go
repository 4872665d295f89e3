package commands

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/switchyard/switchyard/domain/workflow"
)

// A condition that holds takes its edge; one that is false, fails while it runs or gives no
// boolean does not; the compiled program is reused.
func TestEdgeConditionTakesOnlyTrue(t *testing.T) {
	when := edgeCondition(context.Background())
	for _, tc := range []struct {
		src, output string
		want        bool
	}{
		{`output.n > 3 && trigger.go`, `{"n": 5}`, true},
		{`output.n > 3 && trigger.go`, `{"n": 1}`, false},
		{`output.missing > 3`, `{}`, false},
		{`output.n`, `{"n": 1}`, false},
		{`output.n >`, `{"n": 1}`, false},
	} {
		if got := when(workflow.Edge{When: tc.src}, json.RawMessage(tc.output), json.RawMessage(`{"go": true}`)); got != tc.want {
			t.Errorf("%s over %s = %v, want %v", tc.src, tc.output, got, tc.want)
		}
	}
	a, _ := compiledConditions.get(`output.n > 3 && trigger.go`)
	b, _ := compiledConditions.get(`output.n > 3 && trigger.go`)
	if a == nil || a != b {
		t.Fatal("the condition was compiled again")
	}
}
