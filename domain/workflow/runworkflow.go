package workflow

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/domain"
)

// ModuleRunWorkflow is the control module of a child run: its stage triggers another workflow
// of the workspace with the stage's input and completes with that run's output.
const ModuleRunWorkflow = "RUN_WORKFLOW"

// RunWorkflowConfig is a RUN_WORKFLOW component's config.
type RunWorkflowConfig struct {
	WorkflowID string `json:"workflowId"`
}

// ParseRunWorkflow reads and checks a RUN_WORKFLOW config. Whether the workflow exists in the
// workspace is the command's check (ChildWorkflows): the domain cannot read other streams.
func ParseRunWorkflow(config json.RawMessage) (RunWorkflowConfig, error) {
	var rc RunWorkflowConfig
	dec := json.NewDecoder(strings.NewReader(string(config)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rc); err != nil {
		return rc, domain.Invalid("config", "must be {\"workflowId\": id}: %v", err)
	}
	if strings.TrimSpace(rc.WorkflowID) == "" {
		return rc, domain.Invalid("config.workflowId", "is required: the id of the workflow of this workspace to run")
	}
	return rc, nil
}

// ChildRef is a RUN_WORKFLOW component's target, with the field that names it in errors.
type ChildRef struct {
	Field      string
	WorkflowID string
}

// ChildWorkflows lists the workflows the RUN_WORKFLOW components of a valid definition name.
func (d Definition) ChildWorkflows() []ChildRef {
	var refs []ChildRef
	for i, c := range d.Components {
		if c.Module != ModuleRunWorkflow {
			continue
		}
		rc, _ := ParseRunWorkflow(c.Config)
		refs = append(refs, ChildRef{Field: fmt.Sprintf("components[%d] (component %q).config.workflowId", i, c.ID), WorkflowID: rc.WorkflowID})
	}
	return refs
}
