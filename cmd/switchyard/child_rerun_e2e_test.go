package main

import (
	"testing"
	"time"
)

// A re-run of a child run is a top-level run: no parentRunId or parentStageId, and its parent,
// which ended with the child, is left as it was.
func TestRerunOfAChildRunIsTopLevel(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	ws := svc.key.WorkspaceID
	child := svc.createWorkflow(t, ws, `{"name": "picky", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "f", "module": "core.fail", "config": {"code": "negative"}}],
	  "edges": [{"from": "t", "to": "f", "when": "trigger.n < 0"}]}`)["id"].(string)
	parent := svc.createWorkflow(t, ws, childParentDef("parent of picky", child))["id"].(string)
	p := pollRun(t, c, c.trigger(t, parent, `{"x": -1}`), 30*time.Second, terminal)
	call := stageOf(t, p, "call")
	if p["status"] != "FAILED" || call["childRunId"] == nil {
		t.Fatalf("parent %s, stage %v", p["status"], call)
	}
	childRun := pollRun(t, c, call["childRunId"].(string), 30*time.Second, terminal)
	if childRun["status"] != "FAILED" || childRun["parentRunId"] != p["id"] {
		t.Fatalf("child %v", childRun)
	}

	re := pollRun(t, c, c.rerun(t, childRun["id"].(string), `{"input": {"n": 1}}`), 30*time.Second, terminal)
	if re["status"] != "COMPLETED" || re["rerunOf"] != childRun["id"] || re["parentRunId"] != nil || re["parentStageId"] != nil {
		t.Fatalf("the re-run of a child: %v", re)
	}
	after := pollRun(t, c, p["id"].(string), 5*time.Second, terminal)
	if after["status"] != "FAILED" || after["updatedAt"] != p["updatedAt"] || stageOf(t, after, "call")["childRunId"] != childRun["id"] {
		t.Fatalf("the parent after its child's re-run: %v", after)
	}
}
