package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/testenv"
)

// slowWorkflow creates a workflow in ws whose API trigger feeds a 10 s core.delay stage.
func slowWorkflow(t *testing.T, s *guardStack, ws, name string) string {
	t.Helper()
	st, err := s.core.env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws,
		Definition: workflow.Definition{Name: name,
			Components: []workflow.Component{{ID: "start", Module: workflow.ModuleTrigger},
				{ID: "work", Module: "core.delay", Config: json.RawMessage(`{"ms":10000}`)}},
			Edges: []workflow.Edge{{From: "start", To: "work"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return st.ID
}

// trigger starts a run of wf with key and returns its id.
func (s *guardStack) trigger(t *testing.T, key commands.APIKeyMinted, wf string) string {
	t.Helper()
	resp, body := s.do(t, key, http.MethodPost, "/v1/sdk/workflows/"+wf, "")
	var runs []struct{ RunID string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &runs) != nil || len(runs) != 1 {
		t.Fatalf("trigger %s: %d %s", wf, resp.StatusCode, body)
	}
	return runs[0].RunID
}

// submitSlow submits a 10 s core.delay with key and returns the execution id.
func (s *guardStack) submitSlow(t *testing.T, key commands.APIKeyMinted) string {
	t.Helper()
	resp, body := s.do(t, key, http.MethodPost, "/v1/sdk/components", `{"module":"core.delay","input":{},"config":{"ms":10000}}`)
	var ex struct{ ID string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &ex) != nil {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	return ex.ID
}

// One key holds at most MaxStreamsPerKey open streams, execution and run streams together;
// past it the answer is 429 with Retry-After and the error body; a closed stream frees its
// slot, and another key has slots of its own.
func TestOpenStreamsPerKeyAreCapped(t *testing.T) {
	s := newGuardStack(t, httpapi.SDKAuthConfig{MaxStreamsPerKey: 2})
	ws := s.core.env.Workspace(t, 100)
	key, other := s.key(t, ws), s.key(t, ws)
	execPath := "/v1/sdk/components/executions/" + s.submitSlow(t, key) + "/stream"
	runPath := "/v1/sdk/workflows/executions/" + s.trigger(t, key, slowWorkflow(t, s, ws, "slow")) + "/stream"

	first := s.open(t, key, execPath)
	second := s.open(t, key, runPath)
	for _, r := range []*http.Response{first, second} {
		if r.StatusCode != http.StatusOK {
			t.Fatalf("stream within the cap: %d", r.StatusCode)
		}
	}
	for _, path := range []string{execPath, runPath} {
		resp, body := s.do(t, key, http.MethodGet, path, "")
		var e httpapi.ErrorBody
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
			json.Unmarshal(body, &e) != nil || e.StatusCode != 429 || !strings.Contains(e.Message, "streams") {
			t.Fatalf("%s past the cap: %d %q %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if r := s.open(t, other, execPath); r.StatusCode != http.StatusOK {
		t.Fatalf("another key's stream: %d", r.StatusCode)
	}
	// Plain reads are not streams.
	if resp, body := s.do(t, key, http.MethodGet, strings.TrimSuffix(execPath, "/stream"), ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("get while the streams are open: %d %s", resp.StatusCode, body)
	}

	first.Body.Close()
	testenv.Eventually(t, 30*time.Second, "the closed stream's slot to be free", func() bool {
		resp, err := http.DefaultClient.Do(s.request(t, key, http.MethodGet, runPath, ""))
		if err != nil {
			t.Fatal(err)
		}
		ok := resp.StatusCode == http.StatusOK
		if !ok {
			resp.Body.Close()
			time.Sleep(20 * time.Millisecond)
		} else {
			t.Cleanup(func() { resp.Body.Close() })
		}
		return ok
	})
}
