package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// TestRunPageShowsWaitsAndDecidesApprovals: a waiting stage is listed with what it waits for;
// an owner gets the approval form and link, a member neither; the owner's decision completes
// the stage with who decided, and a second decision says it was decided already.
func TestRunPageShowsWaitsAndDecidesApprovals(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	owner, member := s.client(t, s.owner), s.client(t, s.member)
	wf := s.workflow(t, `{"name": "Refunds", "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "ok", "name": "Manager approval", "module": "WAIT", "config": {"approval": {"question": "Refund 40 EUR?"}}, "position": [260, 0]}],
	  "edges": [{"from": "t", "to": "ok"}]}`).ID
	runID := s.trigger(t, wf, `{}`)
	var stageID string
	testenv.Eventually(t, 30*time.Second, "the approval to wait", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), runID)
		for _, x := range st.Stages {
			if x.ComponentID == "ok" && x.Waiting != nil {
				stageID = x.ID
			}
		}
		return err == nil && stageID != ""
	})
	_, page := s.get(t, owner, "/dashboard/runs/"+runID)
	waits := between(page, `<section id="waits">`, "</section>")
	if !strings.Contains(waits, "Refund 40 EUR?") || !strings.Contains(waits, `value="approve"`) || !strings.Contains(waits, "/approvals/") {
		t.Fatalf("the owner's waits section: %s", waits)
	}
	_, page = s.get(t, member, "/dashboard/runs/"+runID)
	waits = between(page, `<section id="waits">`, "</section>")
	if !strings.Contains(waits, "Refund 40 EUR?") || strings.Contains(waits, `value="approve"`) || strings.Contains(waits, "/approvals/") {
		t.Fatalf("a member's waits section: %s", waits)
	}
	path := "/dashboard/runs/" + runID + "/stages/" + stageID + "/approval"
	if code, _ := s.post(t, member, path, url.Values{"decision": {"approve"}}); code != http.StatusForbidden {
		t.Fatalf("a member's decision: %d, want 403", code)
	}
	if code, _ := s.post(t, owner, path, url.Values{"decision": {"approve"}, "comment": {"within budget"}}); code != http.StatusSeeOther {
		t.Fatalf("the owner's decision: %d, want 303 back to the run page", code)
	}
	if _, body := s.get(t, owner, "/dashboard/runs/"+runID+"?approval=1"); !strings.Contains(body, "Decision recorded") {
		t.Fatal("the run page does not say the decision was recorded")
	}
	st, _ := s.env.Cmds.Workflows.Run(context.Background(), runID)
	got, _ := st.Stage(stageID)
	// The output as JSON, not as text: read back from the log it is jsonb's rendering.
	var decided struct {
		By       string `json:"by"`
		Approved bool   `json:"approved"`
	}
	if got.Status != run.StageStatusCompleted || json.Unmarshal(got.Output, &decided) != nil || decided.By != s.owner.Email ||
		!decided.Approved {
		t.Fatalf("the approval stage: %s %s", got.Status, got.Output)
	}
	if code, _ := s.post(t, owner, path, url.Values{"decision": {"reject"}}); code != http.StatusSeeOther {
		t.Fatalf("a second decision: %d", code)
	}
	again, _ := s.env.Cmds.Workflows.Run(context.Background(), runID)
	var before, after any
	if json.Unmarshal(got.Output, &before) != nil || json.Unmarshal(mustStage(t, again, stageID).Output, &after) != nil ||
		!reflect.DeepEqual(before, after) {
		t.Fatalf("a second decision changed the stage: %s, then %s", got.Output, mustStage(t, again, stageID).Output)
	}
}

func mustStage(t *testing.T, st run.State, id string) run.Stage {
	t.Helper()
	x, ok := st.Stage(id)
	if !ok {
		t.Fatalf("no stage %s", id)
	}
	return x
}
