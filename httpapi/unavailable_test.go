package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/testenv"
)

// wantUnavailable checks a 503 with Retry-After and the SPEC.md 7 body.
func wantUnavailable(t *testing.T, what string, resp *http.Response, body []byte) {
	t.Helper()
	var e httpapi.ErrorBody
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil ||
		e.StatusCode != http.StatusServiceUnavailable || e.Error != "Service Unavailable" || e.Message == "" {
		t.Fatalf("%s: %d %s, want 503 with the error body", what, resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%s: 503 without Retry-After", what)
	}
	if strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), "sw_test_") {
		t.Fatalf("%s: the answer names the database: %s", what, body)
	}
}

// A database that refuses connections answers 503 with Retry-After, on the key lookup, the
// handler's reads and /readyz alike, and the service recovers by itself when it is back.
func TestDatabaseOutageAnswers503AndRecovers(t *testing.T) {
	s := newGuardStack(t, httpapi.SDKAuthConfig{})
	env := s.core.env
	ws := env.Workspace(t, 100)
	known, fresh := s.key(t, ws), s.key(t, ws)
	resp, body := s.do(t, known, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{"a":1},"config":{}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	var ex struct{ ID string }
	_ = json.Unmarshal(body, &ex)
	var dbName string
	if err := env.Pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}

	testdb.SetConnections(t, dbName, false)
	t.Cleanup(func() { testdb.SetConnections(t, dbName, true) })
	// The known key is in the auth cache: the handler's own read fails.
	resp, body = s.do(t, known, http.MethodGet, "/v1/sdk/components/executions/"+ex.ID, "")
	wantUnavailable(t, "read with a cached key", resp, body)
	// A key never seen before fails in its lookup.
	resp, body = s.do(t, fresh, http.MethodGet, "/v1/sdk/components/executions/"+ex.ID, "")
	wantUnavailable(t, "key lookup", resp, body)
	resp, body = s.do(t, known, http.MethodPost, "/v1/sdk/components", `{"module":"core.echo","input":{"a":2},"config":{}}`)
	wantUnavailable(t, "submit", resp, body)
	ready, err := http.Get(s.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var rz struct {
		Ready  bool
		Checks []struct {
			Name  string
			OK    bool
			Error string
		}
	}
	_ = json.NewDecoder(ready.Body).Decode(&rz)
	ready.Body.Close()
	if ready.StatusCode != http.StatusServiceUnavailable || rz.Ready || len(rz.Checks) != 1 || rz.Checks[0].Name != "database" ||
		rz.Checks[0].OK || rz.Checks[0].Error != "unavailable" || ready.Header.Get("Retry-After") == "" {
		t.Fatalf("/readyz during the outage: %d %+v", ready.StatusCode, rz)
	}

	testdb.SetConnections(t, dbName, true)
	testenv.Eventually(t, 30*time.Second, "the service to answer again", func() bool {
		resp, _ := s.do(t, fresh, http.MethodGet, "/v1/sdk/components/executions/"+ex.ID, "")
		return resp.StatusCode == http.StatusOK
	})
	ready, err = http.Get(s.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	ready.Body.Close()
	if ready.StatusCode != http.StatusOK {
		t.Fatalf("/readyz after the outage: %d", ready.StatusCode)
	}
}
