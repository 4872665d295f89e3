package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// TestRunPageShowsOutputAndChildRuns: a completed run's page shows its output; a RUN_WORKFLOW
// stage's row links its child run, whose page links back to its parent.
func TestRunPageShowsOutputAndChildRuns(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	owner := s.client(t, s.owner)
	child := s.workflow(t, `{"name": "Child", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "echo", "module": "core.echo"}], "edges": [{"from": "t", "to": "echo"}]}`).ID
	parent := s.workflow(t, fmt.Sprintf(`{"name": "Parent", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "call", "module": "RUN_WORKFLOW", "config": {"workflowId": %q}}], "edges": [{"from": "t", "to": "call"}]}`, child)).ID
	runID := s.trigger(t, parent, `{"marker": "m-42"}`)
	testenv.Eventually(t, 60*time.Second, "the run to complete", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), runID)
		return err == nil && st.Status == run.StatusCompleted
	})
	st, _ := s.env.Cmds.Workflows.Run(context.Background(), runID)
	call := st.Stages[1]
	_, page := s.get(t, owner, "/dashboard/runs/"+runID)
	if out := between(page, `<pre id="run-output">`, "</pre>"); !strings.Contains(out, "m-42") {
		t.Fatalf("the run's output: %q", out)
	}
	row := between(between(page, "<tbody>", "</tbody>"), `data-stage-id="`+call.ID+`">`, "</tr>")
	if !strings.Contains(row, `<a class="child-run" href="/dashboard/runs/`+call.ChildRunID+`">child run</a>`) {
		t.Fatalf("the RUN_WORKFLOW stage's row: %s", row)
	}
	if _, body := s.get(t, owner, "/dashboard/runs/"+runID+"/stages/"+call.ID); !strings.Contains(body, `<a href="/dashboard/runs/`+call.ChildRunID+`" id="stage-child-run">`) {
		t.Fatalf("the RUN_WORKFLOW stage's page does not link its child\n%s", body)
	}
	_, childPage := s.get(t, owner, "/dashboard/runs/"+call.ChildRunID)
	if p := between(childPage, `<p id="parent-run">`, "</p>"); !strings.Contains(p, `href="/dashboard/runs/`+runID+`"`) || !strings.Contains(p, call.ID) {
		t.Fatalf("the child's page does not link its parent: %q", p)
	}
}
