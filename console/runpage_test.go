package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// TestRunPageOpensStages: every stage row of the run page opens the stage's own page with its
// input, output, error and attempts and a link to its execution; the trigger's body is on the
// run page; the table collapses at phone width (labelled cells, class rows).
func TestRunPageOpensStages(t *testing.T) {
	s := newStack(t)
	s.seed(t)
	owner, outsider := s.client(t, s.owner), s.client(t, s.person(t, "member"))
	st, err := s.env.Cmds.Workflows.Run(context.Background(), s.runID)
	if err != nil {
		t.Fatal(err)
	}
	_, page := s.get(t, owner, "/dashboard/runs/"+s.runID)
	if !regexp.MustCompile(`<table id="stages" class="rows[^"]*"`).MatchString(page) {
		t.Fatal("the stage table does not collapse at phone width (no class rows)")
	}
	if body := between(page, `id="trigger-body">`, "</pre>"); !strings.Contains(body, "&#34;items&#34;: [") {
		t.Fatalf("the trigger's body is not shown: %q", body)
	}
	if !strings.Contains(page, `<dt>Took</dt><dd id="duration">`) || strings.Contains(page, `<dd id="duration"></dd>`) {
		t.Fatal("the run page does not say how long the run took")
	}
	rows := between(page, "<tbody>", "</tbody>")
	for _, s := range st.Stages {
		row := between(rows, `data-stage-id="`+s.ID+`">`, "</tr>")
		if !strings.Contains(row, `href="/dashboard/runs/`+st.ID+`/stages/`+s.ID+`"`) {
			t.Fatalf("the row of stage %s opens nothing: %s", s.ID, row)
		}
		if n, labelled := strings.Count(row, "<td"), strings.Count(row, "<td data-label="); n != labelled || n == 0 {
			t.Fatalf("the row of stage %s has %d cells, %d labelled", s.ID, n, labelled)
		}
	}

	stage := func(component string, iteration int) run.Stage {
		for _, x := range st.Stages {
			if x.ComponentID == component && x.Iteration == iteration {
				return x
			}
		}
		t.Fatalf("no stage of %s item %d", component, iteration)
		return run.Stage{}
	}
	open := func(x run.Stage) string {
		t.Helper()
		code, body := s.get(t, owner, "/dashboard/runs/"+st.ID+"/stages/"+x.ID)
		if code != http.StatusOK {
			t.Fatalf("stage %s: %d\n%s", x.ID, code, body)
		}
		return body
	}
	work := stage("work", 1)
	body := open(work)
	for _, want := range []string{`id="stage-input"`, "&#34;n&#34;: 2", `id="stage-output"`, `id="stage-attempts"`, ">completed<",
		`href="/workspaces/` + s.ws + `/executions/` + work.ExecutionID + `"`, "Stage “Handle order”, item 1", `id="stage-duration"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the stage page of an item lacks %q\n%s", want, body)
		}
	}
	if body := open(stage("t", -1)); !strings.Contains(between(body, `id="stage-input">`, "</pre>"), "&#34;items&#34;") ||
		!strings.Contains(body, "The trigger&#39;s body") {
		t.Fatalf("the trigger stage's input is not the trigger's body\n%s", body)
	}
	if body := open(stage("each", -1)); !strings.Contains(body, "runs no module, so it has no attempts") {
		t.Fatalf("the FOR_EACH stage's page\n%s", body)
	}
	for who, c := range map[string]*http.Client{"the owner": owner, "an outsider": outsider} {
		path := "/dashboard/runs/" + st.ID + "/stages/" + work.ID
		if who == "the owner" {
			path = "/dashboard/runs/" + st.ID + "/stages/no-such-stage"
		}
		if code, body := s.get(t, c, path); code != http.StatusNotFound || !strings.Contains(body, "Stage not found") && !strings.Contains(body, "Run not found") {
			t.Fatalf("%s opens %s: %d", who, path, code)
		}
	}
}

// TestRunPageSaysWhatWentWrong: a failed run's banner names the stage and its error, not a
// stage id; a canceled run says canceled with its reason, with no "Failed stages 0" beside
// the stages it stopped; canceling a finished run says it had finished.
func TestRunPageSaysWhatWentWrong(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	owner := s.client(t, s.owner)
	failing := s.workflow(t, `{"name": "Carrier sync", "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "c", "name": "Call carrier", "module": "core.fail", "attempts": 2, "position": [260, 0],
		 "config": {"code": "upstream_down", "message": "the carrier answered 503"}}],
	  "edges": [{"from": "t", "to": "c"}]}`).ID
	runID := s.trigger(t, failing, `{}`)
	testenv.Eventually(t, 60*time.Second, "the run to fail", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), runID)
		return err == nil && st.Status == run.StatusFailed
	})
	st, _ := s.env.Cmds.Workflows.Run(context.Background(), runID)
	_, page := s.get(t, owner, "/dashboard/runs/"+runID)
	banner := between(page, `id="run-error" class="alert" role="alert">`, "</p>")
	if banner != "Stage “Call carrier” failed: upstream_down: the carrier answered 503" {
		t.Fatalf("the failed run's banner: %q", banner)
	}
	for _, x := range st.Stages {
		if strings.Contains(banner, x.ID) {
			t.Fatal("the banner shows a stage id")
		}
	}
	if _, body := s.get(t, owner, "/dashboard/runs/"+runID+"/stages/"+st.Stages[1].ID); strings.Count(body, "upstream_down: the carrier answered 503") < 3 ||
		!strings.Contains(body, "failed, retried") {
		t.Fatalf("the failed stage's page does not show both attempts and the error\n%s", body)
	}
	// A finished run has nothing to cancel: the form is gone, and a late post says why.
	if strings.Contains(page, `id="cancel-form"`) {
		t.Fatal("a finished run offers to cancel it")
	}
	loc := s.location(t, owner, "/dashboard/runs/"+runID+"/cancel", url.Values{})
	if _, body := s.get(t, owner, loc); !strings.Contains(body, "The run had already finished") {
		t.Fatalf("canceling a finished run: %s\n%s", loc, body)
	}

	slow := s.workflow(t, `{"name": "Slow report", "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "d1", "name": "Gather", "module": "core.delay", "config": {"ms": 10000}, "position": [260, 0]}],
	  "edges": [{"from": "t", "to": "d1"}]}`).ID
	slowRun := s.trigger(t, slow, `{}`)
	testenv.Eventually(t, 60*time.Second, "the delay to run", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), slowRun)
		return err == nil && len(st.Stages) == 2 && st.Stages[1].Status == run.StageStatusRunning
	})
	s.location(t, owner, "/dashboard/runs/"+slowRun+"/cancel", url.Values{"reason": {"wrong month"}})
	_, page = s.get(t, owner, "/dashboard/runs/"+slowRun)
	if !strings.Contains(page, `data-status="CANCELED"`) || between(page, `id="run-error" class="alert" role="alert">`, "</p>") != "Canceled: wrong month" ||
		!strings.Contains(page, `<div id="failed-box" hidden>`) || !strings.Contains(page, `<div id="canceled-box"><dt>Stopped by the cancel</dt><dd id="canceled">1</dd>`) ||
		!strings.Contains(page, `<span class="status st-CANCELED">CANCELED</span>`) {
		t.Fatalf("the canceled run's page\n%s", page)
	}
}

// between is the text of s after the first from and before the next to; "" when absent.
func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	in, _, _ := strings.Cut(after, to)
	return in
}
