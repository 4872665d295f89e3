package console_test

import (
	"context"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// A run waiting for a slot of its concurrency key says so on its page, with the key.
func TestRunPageSaysWhyARunWaits(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, 100_000, "welcome"); err != nil {
		t.Fatal(err)
	}
	owner := s.client(t, s.owner)
	wf := s.workflow(t, `{"name": "One export per customer", "concurrency": {"key": "customer", "limit": 1}, "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "d", "name": "Export", "module": "core.delay", "config": {"ms": 10000}, "position": [260, 0]}],
	  "edges": [{"from": "t", "to": "d"}]}`).ID
	first := s.trigger(t, wf, `{"customer": "acme"}`)
	second := s.trigger(t, wf, `{"customer": "acme"}`)
	testenv.Eventually(t, 60*time.Second, "the first run's stage to run", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), first)
		return err == nil && len(st.Stages) == 2 && st.Stages[1].Status == run.StageStatusRunning
	})
	_, page := s.get(t, owner, "/dashboard/runs/"+second)
	notice := html.UnescapeString(between(page, `id="notice">`, "</p>"))
	if !strings.Contains(notice, "Waiting for a slot") || !strings.Contains(notice, "“acme”") || !strings.Contains(notice, "at most 1 run") {
		t.Fatalf("the waiting run's notice: %q", notice)
	}
	if _, page := s.get(t, owner, "/dashboard/runs/"+first); strings.Contains(page, "Waiting for a slot") {
		t.Fatal("the running run says it waits")
	}
}
