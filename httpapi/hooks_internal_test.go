package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// A hook's URL is its credential: the request log keeps the path without the token.
func TestRequestLogLeavesHookTokensOut(t *testing.T) {
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	h := requestLog(log, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	for _, path := range []string{"/hooks/whk_secret-part", "/v1/sdk/modules"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, path, nil))
	}
	entries := hook.AllEntries()
	if len(entries) != 2 {
		t.Fatalf("%d log entries, want 2", len(entries))
	}
	if got := entries[0].Data["path"]; got != "/hooks/{token}" {
		t.Fatalf("logged path %v, want /hooks/{token}", got)
	}
	if got := entries[1].Data["path"]; got != "/v1/sdk/modules" {
		t.Fatalf("logged path %v: other paths are logged as they are", got)
	}
	for _, e := range entries {
		for _, v := range e.Data {
			if s, ok := v.(string); ok && strings.Contains(s, "secret-part") {
				t.Fatalf("the token is in the log: %v", e.Data)
			}
		}
	}
}
