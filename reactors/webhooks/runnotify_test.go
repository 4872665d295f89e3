package webhooks_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchyard/switchyard/client/webhook"
	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/testenv"
)

// endedRun creates a workflow notifying url, signed with secret, triggers it and cancels the
// run, which ends it FAILED without a scheduler.
func (f *fixture) endedRun(t *testing.T, url, secret string) string {
	t.Helper()
	ctx := context.Background()
	cmds := commands.New(f.env.Store, commands.WithSealer(f.sealer))
	wf, err := cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: f.ws, Definition: workflow.Definition{
		Name: "notified", Notify: &workflow.Notify{URL: url, Secret: secret},
		// A stage that nothing runs here keeps the run open until the cancel: a run of the
		// trigger alone ends COMPLETED in its trigger's commit.
		Components: []workflow.Component{{ID: "t", Module: workflow.ModuleTrigger}, {ID: "a", Module: "core.echo"}},
		Edges:      []workflow.Edge{{From: "t", To: "a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: f.ws, WorkflowID: wf.ID, Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmds.Workflows.CancelRun(ctx, runs[0].RunID, "done"); err != nil {
		t.Fatal(err)
	}
	return runs[0].RunID
}

// A run that ended while no dispatcher followed the log is found by the sweep, through the
// run_notifications read model, and delivered once, signed, with its detail as the body; its
// attempt is recorded on the run's notify stream.
func TestSweepDeliversARunTheLivePathMissed(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, nil)
	run := f.endedRun(t, rc.srv.URL+"/runs", "whsec_run")
	f.start(t, rc, "w1", true)
	testenv.Eventually(t, 60*time.Second, "the run's delivery to be recorded", func() bool {
		n, err := commands.New(f.env.Store).Webhooks.RunNotification(context.Background(), run)
		return err == nil && !n.Delivery.DeliveredAt.IsZero()
	})
	got := rc.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	d := got[0]
	if err := webhook.Verify("whsec_run", d.header, d.body, 0); err != nil {
		t.Fatalf("signature: %v", err)
	}
	var detail struct{ ID, Status string }
	if d.header.Get("X-Delivery-Id") != run+":1" || d.header.Get("X-Event") != "workflow.run.terminal" ||
		json.Unmarshal(d.body, &detail) != nil || detail.ID != run || detail.Status != "FAILED" {
		t.Fatalf("delivery %v %s", d.header, d.body)
	}
}
