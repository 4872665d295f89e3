package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// TestRunPageShowsSkippedStages: a stage no taken edge reached says SKIPPED in the stage
// table and on its own page, and its component is SKIPPED in the graph's detail, while the
// branch that ran is COMPLETED.
func TestRunPageShowsSkippedStages(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	owner := s.client(t, s.owner)
	wf := s.workflow(t, `{"name": "Routing", "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "big", "name": "Big order", "module": "core.echo", "position": [260, 0]},
		{"id": "small", "name": "Small order", "module": "core.echo", "position": [260, 120]}],
	  "edges": [{"from": "t", "to": "big", "when": "trigger.total > 100"}, {"from": "t", "to": "small", "when": "trigger.total <= 100"}]}`).ID
	runID := s.trigger(t, wf, `{"total": 20}`)
	testenv.Eventually(t, 60*time.Second, "the run to complete", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), runID)
		return err == nil && st.Status == run.StatusCompleted
	})
	st, _ := s.env.Cmds.Workflows.Run(context.Background(), runID)
	byComponent := map[string]run.Stage{}
	for _, x := range st.Stages {
		byComponent[x.ComponentID] = x
	}
	_, page := s.get(t, owner, "/dashboard/runs/"+runID)
	rows := between(page, "<tbody>", "</tbody>")
	if row := between(rows, `data-stage-id="`+byComponent["big"].ID+`">`, "</tr>"); !strings.Contains(row, `<span class="status st-SKIPPED">SKIPPED</span>`) {
		t.Fatalf("the skipped stage's row: %s", row)
	}
	if row := between(rows, `data-stage-id="`+byComponent["small"].ID+`">`, "</tr>"); !strings.Contains(row, `<span class="status st-COMPLETED">COMPLETED</span>`) {
		t.Fatalf("the stage that ran: %s", row)
	}
	if _, body := s.get(t, owner, "/dashboard/runs/"+runID+"/stages/"+byComponent["big"].ID); !strings.Contains(body, `id="stage-status">SKIPPED<`) ||
		!strings.Contains(body, "Skipped, so it made no attempt.") || !strings.Contains(body, "none: skipped: no incoming edge was taken") {
		t.Fatalf("the skipped stage's page\n%s", body)
	}
	_, raw := s.get(t, owner, "/dashboard/runs/"+runID+"/detail")
	var d struct {
		Components []struct {
			ID, Status string
			Counts     struct{ Skipped int }
		}
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("detail: %v\n%s", err, raw)
	}
	got := map[string]string{}
	for _, c := range d.Components {
		got[c.ID] = c.Status
	}
	if got["big"] != "SKIPPED" || got["small"] != "COMPLETED" {
		t.Fatalf("graph statuses %v", got)
	}
}
