package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// TestRunPageNestedLoops: in the graph's detail a nested loop's body component runs in the
// inner FOR_EACH, the outer FOR_EACH counts its iterations done by its own body (the inner
// loop's stages are the inner loop's), and the gather after the loop is a one-stage component.
func TestRunPageNestedLoops(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	owner := s.client(t, s.owner)
	wf := s.workflow(t, `{"name": "Nested", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "outer", "module": "FOR_EACH", "config": {"items": "groups", "body": ["inner", "w", "total"]}},
		{"id": "inner", "module": "FOR_EACH", "config": {"items": "item.xs", "body": ["w"]}},
		{"id": "w", "module": "core.echo"}, {"id": "total", "module": "core.echo"}, {"id": "report", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "outer"}, {"from": "outer", "to": "inner"}, {"from": "inner", "to": "w", "mapping": {"x": "item"}},
		{"from": "w", "to": "total"}, {"from": "total", "to": "report"}]}`).ID
	runID := s.trigger(t, wf, `{"groups": [{"xs": [1, 2]}, {"xs": [3, 4]}]}`)
	testenv.Eventually(t, 60*time.Second, "the run to complete", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), runID)
		return err == nil && st.Status == run.StatusCompleted
	})
	_, raw := s.get(t, owner, "/dashboard/runs/"+runID+"/detail")
	var d struct {
		Components []struct {
			ID, Status, ForEach string
			Counts              struct{ Completed int }
			IterationsDone      *int
		}
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("detail: %v\n%s", err, raw)
	}
	got := map[string]string{}
	for _, c := range d.Components {
		done := "-"
		if c.IterationsDone != nil {
			done = fmt.Sprint(*c.IterationsDone)
		}
		got[c.ID] = fmt.Sprintf("%s in %q, %d stages, %s done", c.Status, c.ForEach, c.Counts.Completed, done)
	}
	want := map[string]string{"t": `COMPLETED in "", 1 stages, - done`, "outer": `COMPLETED in "", 1 stages, 2 done`,
		"inner": `COMPLETED in "outer", 2 stages, - done`, "w": `COMPLETED in "inner", 4 stages, - done`,
		"total": `COMPLETED in "outer", 2 stages, - done`, "report": `COMPLETED in "", 1 stages, - done`}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("component %s: %q, want %q", id, got[id], w)
		}
	}
}
