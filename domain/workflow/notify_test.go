package workflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain/workflow"
)

// What a person or a caller is shown of a notify holds no sealed value, and the stored
// definition keeps its own.
func TestNotifyIsShownWithoutSecrets(t *testing.T) {
	d := workflow.Definition{Name: "n", Notify: &workflow.Notify{URL: "https://example.com/runs",
		SealedSecret: "sealed-secret", SealedHeaders: "sealed-headers", HeaderNames: []string{"X-A"}}}
	shown, _ := json.Marshal(d.WithoutSecrets())
	if strings.Contains(string(shown), "sealed") || !strings.Contains(string(shown), `"notify":{"url":"https://example.com/runs"}`) {
		t.Fatalf("shown %s", shown)
	}
	if d.Notify.SealedSecret != "sealed-secret" {
		t.Fatal("WithoutSecrets changed the definition it was given")
	}
	view, _ := json.Marshal(d.Notify.View())
	if string(view) != `{"url":"https://example.com/runs","signed":true,"headerNames":["X-A"]}` {
		t.Fatalf("view %s", view)
	}
	if (workflow.Definition{}).WithoutSecrets().Notify != nil || (*workflow.Notify)(nil).View() != nil {
		t.Fatal("a definition without notify shows one")
	}
}
