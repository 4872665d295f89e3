package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
)

// triggerWithKey triggers wf with body under Idempotency-Key key and returns the status and
// the runs answered.
func (s *guardStack) triggerWithKey(t *testing.T, k commands.APIKeyMinted, wf, key, body string) (int, []commands.TriggeredRun) {
	t.Helper()
	req := s.request(t, k, http.MethodPost, "/v1/sdk/workflows/"+wf, body)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var runs []commands.TriggeredRun
	if resp.StatusCode == http.StatusOK && (json.Unmarshal(b, &runs) != nil || len(runs) != 1) {
		t.Fatalf("trigger answered %s", b)
	}
	return resp.StatusCode, runs
}

// runsOf lists the runs of workflow wf in the event log.
func runsOf(t *testing.T, store eventstore.Store, wf string) []string {
	t.Helper()
	events, err := store.ReadAll(context.Background(), eventstore.Position{}, 10000,
		eventstore.Filter{Types: []string{run.Triggered{}.EventType()}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range events {
		var tr run.Triggered
		if json.Unmarshal(e.Data, &tr) == nil && tr.WorkflowID == wf {
			ids = append(ids, tr.RunID)
		}
	}
	return ids
}

// The same Idempotency-Key and body on a trigger answer the first trigger's runs, and start
// no other; the key with another body is a conflict; another workspace's key of the same name
// is its own.
func TestTriggerIdempotencyKey(t *testing.T) {
	s := newGuardStack(t, httpapi.SDKAuthConfig{})
	ws, other := s.core.env.Workspace(t, 100), s.core.env.Workspace(t, 100)
	wf, otherWf := slowWorkflow(t, s, ws, "keyed"), slowWorkflow(t, s, other, "keyed")
	key, otherKey := s.key(t, ws), s.key(t, other)

	status, first := s.triggerWithKey(t, key, wf, "order-7", `{"n":1}`)
	if status != http.StatusOK {
		t.Fatalf("first trigger: %d", status)
	}
	status, again := s.triggerWithKey(t, key, wf, "order-7", `{"n":1}`)
	if status != http.StatusOK || !slices.Equal(again, first) {
		t.Fatalf("second trigger: %d %v, want the first's %v", status, again, first)
	}
	if runs := runsOf(t, s.core.env.Store, wf); !slices.Equal(runs, []string{first[0].RunID}) {
		t.Fatalf("runs of the workflow: %v, want only %s", runs, first[0].RunID)
	}
	if status, _ := s.triggerWithKey(t, key, wf, "order-7", `{"n":2}`); status != http.StatusConflict {
		t.Fatalf("the key with another body: %d, want 409", status)
	}
	status, theirs := s.triggerWithKey(t, otherKey, otherWf, "order-7", `{"n":1}`)
	if status != http.StatusOK || theirs[0].RunID == first[0].RunID {
		t.Fatalf("another workspace's key: %d %v", status, theirs)
	}
	if _, fresh := s.triggerWithKey(t, key, wf, "order-8", `{"n":1}`); fresh[0].RunID == first[0].RunID {
		t.Fatal("another key answered the first key's run")
	}
}
