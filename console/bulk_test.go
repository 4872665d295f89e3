package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/reactors/bulks"
	"github.com/switchyard/switchyard/testenv"
)

// The run page's re-run form starts a re-run from the chosen stage and shows it; a bad input is
// refused on the page with the form kept; a member without admin rights is refused.
func TestRunPageRerunsARun(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	owner := s.client(t, s.owner)
	wf := s.workflow(t, `{"name": "Two steps", "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "a", "name": "Echo", "module": "core.echo", "position": [260, 0]},
		{"id": "b", "name": "Echo again", "module": "core.echo", "position": [520, 0]}],
	  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}]}`).ID
	runID := s.trigger(t, wf, `{"n": 1}`)
	testenv.Eventually(t, 60*time.Second, "the run to complete", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), runID)
		return err == nil && st.Status == run.StatusCompleted
	})
	_, page := s.get(t, owner, "/dashboard/runs/"+runID)
	if !strings.Contains(page, `id="rerun-form"`) || !strings.Contains(page, `<option value="b">b</option>`) {
		t.Fatalf("the ended run's page has no re-run form\n%s", page)
	}

	st, body := s.post(t, owner, "/dashboard/runs/"+runID+"/rerun", url.Values{"fromStage": {"b"}, "input": {"[1]"}})
	if st != http.StatusBadRequest || !strings.Contains(body, "Input: must be a JSON object") || !strings.Contains(body, `>[1]</textarea>`) {
		t.Fatalf("a re-run with a bad input: %d\n%s", st, body)
	}
	loc := s.location(t, owner, "/dashboard/runs/"+runID+"/rerun", url.Values{"fromStage": {"b"}, "input": {`{"n": 2}`}})
	newID, ok := strings.CutPrefix(loc, "/dashboard/runs/")
	newID, _, _ = strings.Cut(newID, "?")
	if !ok || newID == runID {
		t.Fatalf("the re-run redirected to %s", loc)
	}
	if _, page := s.get(t, owner, loc); !strings.Contains(page, "A re-run of run "+runID) {
		t.Fatalf("the re-run's page\n%s", page)
	}
	re, err := s.env.Cmds.Workflows.Run(context.Background(), newID)
	if err != nil || re.RerunOf != runID || string(re.Input) != `{"n": 2}` {
		t.Fatalf("the re-run: %v rerunOf %s input %s", err, re.RerunOf, re.Input)
	}
	member := s.client(t, s.member)
	if _, page := s.get(t, member, "/dashboard/runs/"+runID); strings.Contains(page, `id="rerun-form"`) {
		t.Fatal("a member without admin rights is offered the re-run form")
	}
	if st, _ := s.post(t, member, "/dashboard/runs/"+runID+"/rerun", url.Values{}); st != http.StatusForbidden {
		t.Fatalf("a member's re-run: %d", st)
	}
}

// The workflow page's bulk form cancels the workflow's waiting runs and shows the bulk's
// progress page until it completes; a bad time is refused on the page with the form kept.
func TestWorkflowPageBulkCancels(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	testenv.Go(t, bulks.New(s.env.Store, s.env.Cmds, s.env.Queries, bulks.Config{SweepInterval: 100 * time.Millisecond}).Run)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	owner := s.client(t, s.owner)
	wf := s.workflow(t, `{"name": "Hold", "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "w", "name": "Wait", "module": "core.fail", "config": {"code": "flaky"}, "retry": {"attempts": 2, "initialIntervalMs": 3600000}, "position": [260, 0]}],
	  "edges": [{"from": "t", "to": "w"}]}`).ID
	var runs []string
	for range 3 {
		runs = append(runs, s.trigger(t, wf, `{}`))
	}
	s.env.CaughtUp(t, "runs")
	path := "/workspaces/" + s.ws + "/workflows/" + wf
	if _, page := s.get(t, owner, path); !strings.Contains(page, `id="bulk-form"`) {
		t.Fatalf("the workflow page has no bulk form\n%s", page)
	}
	st, body := s.post(t, owner, path+"/bulk", url.Values{"action": {"cancel"}, "createdAfter": {"yesterday"}, "reason": {"kept"}})
	if st != http.StatusBadRequest || !strings.Contains(body, "Filter.createdAfter: must be a time") || !strings.Contains(body, `value="kept"`) {
		t.Fatalf("a bulk with a bad time: %d\n%s", st, body)
	}
	loc := s.location(t, owner, path+"/bulk", url.Values{"action": {"cancel"}, "status": {""}, "createdAfter": {"2020-01-01T00:00"}, "reason": {"from the console"}})
	if !strings.HasPrefix(loc, path+"/bulks/") {
		t.Fatalf("the bulk redirected to %s", loc)
	}
	var page string
	testenv.Eventually(t, 60*time.Second, "the bulk to complete", func() bool {
		_, page = s.get(t, owner, loc)
		return strings.Contains(page, `<dd id="bulk-status">COMPLETED</dd>`)
	})
	if !strings.Contains(page, `<dd id="bulk-matched">3</dd>`) || !strings.Contains(page, `<dd id="bulk-done">3</dd>`) || !strings.Contains(page, "from the console") {
		t.Fatalf("the completed bulk's page\n%s", page)
	}
	for _, id := range runs {
		r, err := s.env.Cmds.Workflows.Run(context.Background(), id)
		if err != nil || r.Status != run.StatusFailed || r.CancelReason != "from the console" {
			t.Fatalf("run %s after the bulk: %v %s %q", id, err, r.Status, r.CancelReason)
		}
	}
	s.env.CaughtUp(t, "bulks")
	if _, page := s.get(t, owner, path); !strings.Contains(page, `id="bulks"`) || !strings.Contains(page, strings.TrimPrefix(loc, path+"/bulks/")) {
		t.Fatalf("the workflow page does not list the bulk\n%s", page)
	}
	member := s.client(t, s.member)
	if _, page := s.get(t, member, path); strings.Contains(page, `id="bulk-form"`) {
		t.Fatal("a member without admin rights is offered the bulk form")
	}
	if st, _ := s.post(t, member, path+"/bulk", url.Values{"action": {"cancel"}}); st != http.StatusForbidden {
		t.Fatalf("a member's bulk: %d", st)
	}
}
