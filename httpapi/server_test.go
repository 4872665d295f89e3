package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Every /v1 error, unknown routes and wrong methods included, has the SPEC.md 7 body.
func TestUnknownRoutesAndMethodsHaveTheErrorBody(t *testing.T) {
	s := NewServer(ServerConfig{})
	s.V1.HandleFunc("/sdk/components", func(w http.ResponseWriter, r *http.Request) {}).Methods(http.MethodPost)
	s.V1.HandleFunc("/sdk/components/executions/{id}", func(w http.ResponseWriter, r *http.Request) {}).Methods(http.MethodGet)
	s.V1.HandleFunc("/sdk/modules", func(w http.ResponseWriter, r *http.Request) {}).Methods(http.MethodGet)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodDelete, "/v1/sdk/components", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/sdk/components", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/nope", http.StatusNotFound},
		{http.MethodPost, "/nope", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		var body ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != tc.status ||
			body.StatusCode != tc.status || body.Error != http.StatusText(tc.status) || body.Message == "" {
			t.Errorf("%s %s: %d %s; want %d with the error body", tc.method, tc.path, rec.Code, rec.Body, tc.status)
		}
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/sdk/components", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("the route itself: %d", rec.Code)
	}
}
