package workflow_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

func TestRunWorkflowConfigIsChecked(t *testing.T) {
	cases := map[string]string{
		`{}`:                          `components[1] (component "call").config.workflowId`,
		`{"workflowId": " "}`:         `components[1] (component "call").config.workflowId`,
		`{"workflowId": "a", "x": 1}`: `components[1] (component "call").config`,
		`{"workflowId": 3}`:           `components[1] (component "call").config`,
	}
	for cfg, field := range cases {
		d := parse(t, `{"name": "p", "components": [{"id": "t", "module": "ON_API_CALLED"},
			{"id": "call", "module": "RUN_WORKFLOW", "config": `+cfg+`}], "edges": [{"from": "t", "to": "call"}]}`)
		var ve *domain.ValidationError
		if err := d.Validate(checkModules); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("config %s: %v, want a 400 naming %s", cfg, err, field)
		}
	}
	d := parse(t, `{"name": "p", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "call", "module": "RUN_WORKFLOW", "config": {"workflowId": "wf-2"}}], "edges": [{"from": "t", "to": "call"}]}`)
	if err := d.Validate(checkModules); err != nil {
		t.Fatal(err)
	}
	want := []workflow.ChildRef{{Field: `components[1] (component "call").config.workflowId`, WorkflowID: "wf-2"}}
	if got := d.ChildWorkflows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ChildWorkflows = %+v", got)
	}
}
