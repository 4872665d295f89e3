package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/testenv"
)

// stageExecution waits for the run's first module stage to be dispatched and returns its
// execution id.
func (s *guardStack) stageExecution(t *testing.T, runID string) string {
	t.Helper()
	var id string
	testenv.Eventually(t, 30*time.Second, "a stage execution of run "+runID, func() bool {
		st, err := s.core.env.Cmds.Workflows.Run(context.Background(), runID)
		if err != nil {
			return false
		}
		for _, stage := range st.Stages {
			if stage.ExecutionID != "" {
				id = stage.ExecutionID
				_, err := s.core.env.Cmds.Executions.Execution(context.Background(), id)
				return err == nil
			}
		}
		return false
	})
	return id
}

// A key scoped to workflows (allowedWorkflowIds) triggers and follows those workflows, reads
// their stages' executions and lists modules, and nothing else: no standalone component, no
// other execution of its workspace.
func TestScopedKeysHaveLeastPrivilege(t *testing.T) {
	s := newGuardStack(t, httpapi.SDKAuthConfig{})
	ws := s.core.env.Workspace(t, 100)
	mine, theirs := slowWorkflow(t, s, ws, "mine"), slowWorkflow(t, s, ws, "theirs")
	scoped, full := s.key(t, ws, mine), s.key(t, ws)

	standalone := s.submitSlow(t, full)
	myRun := s.trigger(t, scoped, mine)
	theirRun := s.trigger(t, full, theirs)
	myStage, theirStage := s.stageExecution(t, myRun), s.stageExecution(t, theirRun)

	for _, tc := range []struct {
		name         string
		key          commands.APIKeyMinted
		method, path string
		body         string
		want         int
	}{
		{"scoped: submit a standalone component", scoped, http.MethodPost, "/v1/sdk/components",
			`{"module":"http.request","input":{},"config":{"url":"https://example.com"}}`, http.StatusForbidden},
		{"scoped: read another key's standalone execution", scoped, http.MethodGet, "/v1/sdk/components/executions/" + standalone, "", http.StatusForbidden},
		{"scoped: stream it", scoped, http.MethodGet, "/v1/sdk/components/executions/" + standalone + "/stream", "", http.StatusForbidden},
		{"scoped: replay its callback", scoped, http.MethodPost, "/v1/sdk/components/executions/" + standalone + "/replay-callback", "", http.StatusForbidden},
		{"scoped: read a stage of another workflow's run", scoped, http.MethodGet, "/v1/sdk/components/executions/" + theirStage, "", http.StatusForbidden},
		{"scoped: read that run", scoped, http.MethodGet, "/v1/sdk/workflows/executions/" + theirRun, "", http.StatusForbidden},
		{"scoped: replay that run's callback", scoped, http.MethodPost, "/v1/sdk/workflows/executions/" + theirRun + "/replay-callback", "", http.StatusForbidden},
		{"scoped: replay an unknown run's callback", scoped, http.MethodPost, "/v1/sdk/workflows/executions/0b5e0d8e-53a4-4a45-9ac4-6a3a2b7d0f11/replay-callback", "", http.StatusNotFound},
		{"scoped: replay its own unfinished run's callback", scoped, http.MethodPost, "/v1/sdk/workflows/executions/" + myRun + "/replay-callback", "", http.StatusConflict},
		{"scoped: re-run that run", scoped, http.MethodPost, "/v1/sdk/workflows/executions/" + theirRun + "/rerun", "", http.StatusForbidden},
		{"scoped: re-run an unknown run", scoped, http.MethodPost, "/v1/sdk/workflows/executions/0b5e0d8e-53a4-4a45-9ac4-6a3a2b7d0f11/rerun", "", http.StatusNotFound},
		{"scoped: re-run its own unfinished run", scoped, http.MethodPost, "/v1/sdk/workflows/executions/" + myRun + "/rerun", "", http.StatusConflict},
		{"scoped: trigger another workflow", scoped, http.MethodPost, "/v1/sdk/workflows/" + theirs, "", http.StatusForbidden},
		{"scoped: read an unknown execution", scoped, http.MethodGet, "/v1/sdk/components/executions/0b5e0d8e-53a4-4a45-9ac4-6a3a2b7d0f11", "", http.StatusNotFound},
		{"scoped: read its run", scoped, http.MethodGet, "/v1/sdk/workflows/executions/" + myRun, "", http.StatusOK},
		{"scoped: read its run's stage", scoped, http.MethodGet, "/v1/sdk/components/executions/" + myStage, "", http.StatusOK},
		{"scoped: list modules", scoped, http.MethodGet, "/v1/sdk/modules", "", http.StatusOK},
		{"scoped: update its workflow's component", scoped, http.MethodPost, "/v1/sdk/workflows/" + mine + "/components/work", `{"name":"renamed"}`, http.StatusOK},
		{"unrestricted: read the other run's stage", full, http.MethodGet, "/v1/sdk/components/executions/" + theirStage, "", http.StatusOK},
		{"unrestricted: read the scoped key's stage", full, http.MethodGet, "/v1/sdk/components/executions/" + myStage, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.do(t, tc.key, tc.method, tc.path, tc.body)
			var e httpapi.ErrorBody
			if resp.StatusCode != tc.want || (tc.want >= 400 && (json.Unmarshal(body, &e) != nil || e.StatusCode != tc.want)) {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tc.want)
			}
		})
	}
	// The scoped key's own stream of its stage is open to it.
	if r := s.open(t, scoped, "/v1/sdk/components/executions/"+myStage+"/stream"); r.StatusCode != http.StatusOK {
		t.Fatalf("scoped stream of its stage: %d", r.StatusCode)
	}
}
