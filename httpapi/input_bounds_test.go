package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	httpapi "github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/projections"
)

// Every paginated list, API and console alike, bounds page and limit in one place
// (projections.NewPage): out of bounds is a 400 naming the parameter and its bounds, never
// the 500 an overflowing OFFSET gave; the last page in bounds is served.
func TestListsBoundPageAndLimit(t *testing.T) {
	s := newRouteFuzzStack(t)
	ws := "/v1/workspaces/" + s.ws
	lists := []string{"/v1/sdk/modules", "/v1/sdk/workflows", ws + "/workflows", ws + "/billing/transactions",
		ws + "/mcp-tokens", ws + "/authorizations"}
	pages := []string{"/workspaces/" + s.ws + "/workflows", "/workspaces/" + s.ws + "/runs", "/workspaces/" + s.ws + "/executions",
		"/workspaces/" + s.ws + "/api-keys", "/workspaces/" + s.ws + "/billing", "/workspaces/" + s.ws + "/mcp-tokens"}
	pageBounds := fmt.Sprintf("page: must be an integer from 1 to %d", projections.MaxPage)
	limitBounds := fmt.Sprintf("limit: must be an integer from 1 to %d", projections.MaxPageLimit)
	for _, c := range []struct {
		query string
		want  int
		says  string
	}{
		{"page=9223372036854775807", http.StatusBadRequest, pageBounds},
		{"page=9223372036854775807&limit=100", http.StatusBadRequest, pageBounds},
		{fmt.Sprintf("page=%d", projections.MaxPage+1), http.StatusBadRequest, pageBounds},
		{"page=0", http.StatusBadRequest, pageBounds},
		{"page=two", http.StatusBadRequest, pageBounds},
		{"limit=9223372036854775807", http.StatusBadRequest, limitBounds},
		{fmt.Sprintf("page=%d&limit=%d", projections.MaxPage, projections.MaxPageLimit), http.StatusOK, ""},
	} {
		for _, path := range lists {
			status, body := s.send(t, path+"?"+c.query, "")
			if status != c.want || !strings.Contains(body, c.says) {
				t.Errorf("GET %s?%s: %d %s, want %d saying %q", path, c.query, status, body, c.want, c.says)
			}
		}
		for _, path := range pages {
			status, body := s.send(t, path+"?"+c.query, "text/html")
			if status != c.want || c.says != "" && !strings.Contains(body, "P"+c.says[1:]) && !strings.Contains(body, "L"+c.says[1:]) {
				t.Errorf("page %s?%s: %d, want %d saying %q", path, c.query, status, c.want, c.says)
			}
		}
	}

	// The OpenAPI document states the same bounds.
	var doc struct {
		Components struct {
			Parameters map[string]struct {
				Schema struct{ Minimum, Maximum int }
			}
		}
	}
	if err := json.Unmarshal(httpapi.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	p, l := doc.Components.Parameters["page"].Schema, doc.Components.Parameters["limit"].Schema
	if p.Minimum != 1 || p.Maximum != projections.MaxPage || l.Minimum != 1 || l.Maximum != projections.MaxPageLimit {
		t.Errorf("openapi.json bounds page %+v and limit %+v, want 1 to %d and 1 to %d", p, l, projections.MaxPage, projections.MaxPageLimit)
	}
}

// NUL or invalid UTF-8 in a path names nothing (404, as an unknown id); in a query parameter it
// is a 400 naming the parameter, in a page for a browser outside /v1.
func TestBadTextInPathsAndQueries(t *testing.T) {
	s := newRouteFuzzStack(t)
	for _, c := range []struct {
		path, accept string
		want         int
		says         string
	}{
		{"/v1/workspaces/%00/billing", "", http.StatusNotFound, `"statusCode":404`},
		{"/v1/workspaces/%ff/workflows?page=2", "", http.StatusNotFound, `"statusCode":404`},
		{"/workspaces/%00", "text/html", http.StatusNotFound, "There is no page at this address."},
		{"/workspaces/%ED%A0%80/runs", "text/html", http.StatusNotFound, "There is no page at this address."},
		{"/v1/sdk/workflows?x=%ff", "", http.StatusBadRequest, `"message":"x: must be UTF-8 text without NUL characters"`},
		{"/v1/workspaces/" + s.ws + "/workflows?limit=5&q=%00", "text/html", http.StatusBadRequest, `"message":"q: must be UTF-8 text`},
		{"/workspaces/" + s.ws + "/executions?module=%00", "text/html", http.StatusBadRequest, "The address&#39;s module parameter is not text"},
		{"/workspaces/" + s.ws + "/runs?workflow=%ff", "text/html", http.StatusBadRequest, "The address&#39;s workflow parameter is not text"},
		{"/workspaces/" + s.ws + "/runs?%ff=1", "application/json", http.StatusBadRequest, `"message":"\"\\xff\": must be UTF-8 text`},
	} {
		status, body := s.send(t, c.path, c.accept)
		if status != c.want || !strings.Contains(body, c.says) {
			t.Errorf("GET %s (Accept %q): %d %.300s, want %d saying %s", c.path, c.accept, status, body, c.want, c.says)
		}
	}
}

// A browser that asks for a page at an unknown address outside /v1 gets a page; /v1 and API
// clients keep the SPEC.md 7 body.
func TestUnknownAddressAnswersABrowserWithAPage(t *testing.T) {
	s := newRouteFuzzStack(t)
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	resp, body := s.call(t, http.MethodGet, "/no/such/page", "", "Accept", browser)
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "There is no page at this address.") || !strings.Contains(string(body), `href="/"`) {
		t.Errorf("a browser at an unknown page: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the page lacks the pages' headers: %v", resp.Header)
	}
	for _, c := range []struct{ path, accept string }{{"/no/such/page", ""}, {"/no/such/page", "application/json"}, {"/v1/no/such", browser}} {
		resp, body := s.call(t, http.MethodGet, c.path, "", "Accept", c.accept)
		var e httpapi.ErrorBody
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.StatusCode != http.StatusNotFound || e.Message == "" {
			t.Errorf("GET %s (Accept %q): %d %s, want the 404 error body", c.path, c.accept, resp.StatusCode, body)
		}
	}
}

// POST /v1/workspaces/{id}/api-keys refuses a scope naming another workspace's workflow, or
// none, with a 400 naming the ids (commands.CreateAPIKey, shared by the console and the CLI).
func TestAPIKeyScopeOfNoWorkflowIsRefused(t *testing.T) {
	s := newRouteFuzzStack(t)
	spec := loadSpec(t)
	other, err := s.env.Cmds.Workspaces.CreateWorkspace(t.Context(), "other-"+uuid.NewString()[:8], s.email)
	if err != nil {
		t.Fatal(err)
	}
	bearer := []string{"Authorization", "Bearer " + s.session}
	theirs := s.created(t, "/v1/workspaces/"+other+"/workflows", `{"name":"theirs","components":[{"id":"t","module":"ON_API_CALLED"}]}`, bearer)["id"].(string)
	nothing := uuid.NewString()
	path := "/v1/workspaces/" + s.ws + "/api-keys"
	resp, body := s.call(t, http.MethodPost, path, `{"label":"ci","allowedWorkflowIds":["`+s.ids["workflowId"]+`","`+theirs+`","`+nothing+`"]}`, bearer...)
	e := conforms(t, spec, resp, body, http.StatusBadRequest)
	if want := `allowedWorkflowIds: names no workflow of this workspace: "` + theirs + `", "` + nothing + `"`; e["message"] != want {
		t.Errorf("message %q, want %q", e["message"], want)
	}
	resp, body = s.call(t, http.MethodPost, path, `{"label":"ci","allowedWorkflowIds":["`+s.ids["workflowId"]+`"]}`, bearer...)
	conforms(t, spec, resp, body, http.StatusCreated)
}

// send GETs path with the credentials its route wants (the fuzz target's) and accept.
func (s *routeFuzzStack) send(t *testing.T, path, accept string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.RequestURI = req.URL.RequestURI()
	s.authenticate(req, req.URL.Path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.RequestURI = ""
	resp, body := send(t, req)
	return resp.StatusCode, string(body)
}
