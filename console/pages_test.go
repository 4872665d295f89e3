package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/testenv"
)

// TestConsoleAnswersTheNextQuestion covers what a newcomer asked of the lists and detail
// pages: times to the second and durations, the balance's parts named for what they are,
// executions with their run and workflow, searchable by id and marked when cached, a
// workflow's config and a way to start it, and a callback that failed not called delivered.
func TestConsoleAnswersTheNextQuestion(t *testing.T) {
	s := newStack(t)
	s.seed(t)
	owner, member := s.client(t, s.owner), s.client(t, s.member)
	ws := "/workspaces/" + s.ws
	toTheSecond := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`)

	t.Run("times and durations", func(t *testing.T) {
		_, body := s.get(t, owner, ws+"/runs")
		if !toTheSecond.MatchString(body) {
			t.Fatal("the runs list gives times to the minute")
		}
		row := between(body, `href="/dashboard/runs/`+s.runID+`"`, "</tr>")
		if !regexp.MustCompile(`data-label="Took"[^>]*>\d+(\.\d)? (ms|s)<`).MatchString(row) {
			t.Fatalf("the runs list does not say how long the run took: %s", row)
		}
		if _, body := s.get(t, owner, ws+"/executions/"+s.executionID); !regexp.MustCompile(`<dd id="took">\d+(\.\d)? (ms|s)</dd>`).MatchString(body) {
			t.Fatal("the execution page does not say how long it took")
		}
	})

	t.Run("balance", func(t *testing.T) {
		_, body := s.get(t, owner, ws+"/billing")
		for _, want := range []string{"<dt>Paid credit</dt>", "<dt>Plan-included credit left</dt>", "<dt>Spendable in all</dt>", "Plan-included after"} {
			if !strings.Contains(body, want) {
				t.Fatalf("billing lacks %q", want)
			}
		}
		if strings.Contains(body, "<dt>Usage</dt>") {
			t.Fatal("billing calls the plan-included balance usage")
		}
		if _, body := s.get(t, owner, ws); strings.Contains(body, "usage:") || !strings.Contains(body, "plan-included") {
			t.Fatal("the home calls the plan-included balance usage")
		}
	})

	t.Run("executions list", func(t *testing.T) {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), s.runID)
		if err != nil {
			t.Fatal(err)
		}
		stageExec := st.Stages[1].ExecutionID
		_, body := s.get(t, owner, ws+"/executions")
		row := between(body, `data-execution-id="`+stageExec+`">`, "</tr>")
		if !strings.Contains(row, `<a href="/dashboard/runs/`+s.runID+`" class="exec-run">Nightly import</a>`) {
			t.Fatalf("a stage's execution lacks its run and workflow: %s", row)
		}
		if row := between(body, `data-execution-id="`+s.executionID+`">`, "</tr>"); !strings.Contains(row, "SDK call") {
			t.Fatalf("an SDK call's row: %s", row)
		}
		_, body = s.get(t, owner, ws+"/executions?id="+strings.ToUpper(s.executionID[:8]))
		if n := strings.Count(body, "data-execution-id="); n != 1 || !strings.Contains(body, `data-execution-id="`+s.executionID+`"`) {
			t.Fatalf("searching by the id's beginning lists %d executions", n)
		}
		resp, err := owner.Get(s.srv.URL + ws + "/executions?id=" + s.executionID)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != ws+"/executions/"+s.executionID {
			t.Fatalf("searching a whole id: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		if st, body := s.get(t, owner, ws+"/executions?id=drop+table"); st != http.StatusBadRequest || !strings.Contains(body, "Id: must be an execution id") {
			t.Fatalf("a bad id search: %d", st)
		}
		cached := s.cachedRepeat(t)
		s.env.CaughtUp(t, "executions")
		_, body = s.get(t, owner, ws+"/executions")
		if row := between(body, `data-execution-id="`+cached+`">`, "</tr>"); !strings.Contains(row, `class="badge cached"`) {
			t.Fatalf("a cached repeat is not marked: %s", row)
		}
	})

	t.Run("workflow config and trigger", func(t *testing.T) {
		page := ws + "/workflows/" + s.workflowID
		_, body := s.get(t, owner, page)
		if !strings.Contains(between(body, `data-component="each">`, "</tr>"), "&#34;items&#34;: &#34;items&#34;") || !strings.Contains(body, `id="definition"`) {
			t.Fatal("the workflow page shows no config")
		}
		if !strings.Contains(body, `id="trigger-form"`) {
			t.Fatal("the workflow page offers an owner no way to start a run")
		}
		if strings.Contains(body, `class="retry-policy`) || strings.Contains(body, `id="run-timeout"`) {
			t.Fatal("a workflow without retry policies or timeouts shows some")
		}
		timed := s.workflow(t, `{"name": "Patient", "timeoutMs": 60000, "components": [
			{"id": "t", "module": "ON_API_CALLED"},
			{"id": "call", "module": "core.echo", "timeoutMs": 2000, "retry": {"attempts": 5, "initialIntervalMs": 500, "backoffCoefficient": 3, "maxIntervalMs": 4000, "nonRetryableErrors": ["bad_input"]}}],
		  "edges": [{"from": "t", "to": "call"}]}`)
		_, body = s.get(t, owner, ws+"/workflows/"+timed.ID)
		row := between(body, `data-component="call">`, "</tr>")
		for _, want := range []string{">5<", "waits 500 ms, ×3 each retry, at most 4000 ms; never retries <code>bad_input</code>", "2000 ms per attempt"} {
			if !strings.Contains(row, want) {
				t.Fatalf("the component's row lacks %q: %s", want, row)
			}
		}
		if !strings.Contains(body, `<dd id="run-timeout">60000 ms</dd>`) {
			t.Fatal("the workflow page does not show the run timeout")
		}
		if _, body := s.get(t, member, page); strings.Contains(body, `id="trigger-form"`) || !strings.Contains(body, "&#34;items&#34;: &#34;items&#34;") {
			t.Fatal("a member gets the trigger form, or no config")
		}
		if st, _ := s.post(t, member, page, url.Values{"body": {`{}`}}); st != http.StatusForbidden {
			t.Fatalf("a member starts a run: %d", st)
		}
		if st, body := s.post(t, owner, page, url.Values{"body": {`[1, 2]`}}); st != http.StatusBadRequest || !strings.Contains(body, "Body: must be a JSON object") ||
			!strings.Contains(body, "[1, 2]</textarea>") {
			t.Fatalf("a body that is no object: %d", st)
		}
		loc := s.location(t, owner, page, url.Values{"body": {`{"items": [7, 8]}`}})
		runID := strings.TrimPrefix(loc, "/dashboard/runs/")
		run, err := s.env.Cmds.Workflows.Run(context.Background(), runID)
		if err != nil || string(run.Input) != `{"items": [7, 8]}` || run.WorkflowID != s.workflowID {
			t.Fatalf("the started run %q: %+v %v", loc, run.Input, err)
		}
	})

	t.Run("a callback that failed", func(t *testing.T) {
		id := s.callbackTo(t, "/hooks/fail")
		testenv.Eventually(t, 30*time.Second, "the first delivery to fail", func() bool {
			a, err := s.env.Cmds.Webhooks.WebhookAttempts(context.Background(), id)
			return err == nil && len(a) > 0 && a[0].Error != nil
		})
		_, body := s.get(t, owner, ws+"/executions/"+id)
		summary := between(body, `id="callback-summary">`, "</p>")
		if strings.Contains(summary, "Delivered to") || !strings.Contains(summary, "the last attempt failed") {
			t.Fatalf("the callback summary of a failed delivery: %q", summary)
		}
		if _, body := s.get(t, owner, ws+"/executions/"+s.executionID); !strings.Contains(between(body, `id="callback-summary">`, "</p>"), "Delivered to") {
			t.Fatal("a delivered callback does not say so")
		}
	})
}

// cachedRepeat submits the same call twice within a cache window and returns the repeat.
func (s *stack) cachedRepeat(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	call := commands.SubmitExecution{WorkspaceID: s.ws, Module: "core.echo", Input: json.RawMessage(`{"cache": "me"}`),
		Config: json.RawMessage(`{}`), Attempts: 1, CacheWindow: time.Hour}
	first, err := s.env.Cmds.Executions.SubmitExecution(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the first call to complete", func() bool {
		st, err := s.env.Cmds.Executions.Execution(ctx, first.ID)
		return err == nil && st.Status.Terminal()
	})
	again, err := s.env.Cmds.Executions.SubmitExecution(ctx, call)
	if err != nil || again.CachedFrom == "" {
		t.Fatalf("the repeat is not cached: %+v %v", again, err)
	}
	return again.ID
}
