package commands

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/seal"
)

// TestWorkflowDocExamplesAreValid keeps docs/workflows.md honest: every JSON definition in it
// passes the validation a create does, against the built-in modules.
func TestWorkflowDocExamplesAreValid(t *testing.T) {
	doc, err := os.ReadFile("../docs/workflows.md")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := seal.GenerateKey()
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	h := New(nil, WithSealer(sealer)) // the notify example has a secret to seal
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	checked := 0
	for _, b := range blocks {
		if !strings.Contains(b[1], `"components"`) {
			continue
		}
		var d workflow.Definition
		if err := json.Unmarshal([]byte(b[1]), &d); err != nil {
			t.Fatalf("example does not parse: %v\n%s", err, b[1])
		}
		if _, err := h.Workflows.prepareDefinition(context.Background(), "workspace", d); err != nil {
			t.Fatalf("example %q is invalid: %v", d.Name, err)
		}
		checked++
	}
	if checked < 4 {
		t.Fatalf("found %d definitions in docs/workflows.md, want the format example and three worked examples", checked)
	}
}
