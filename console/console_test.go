package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/testenv"
)

// pages are the console's pages of the seeded workspace, with text each must show.
func (s *stack) pages() []struct{ name, path, want string } {
	ws := "/workspaces/" + s.ws
	return []struct{ name, path, want string }{
		{"home", ws, "Recent runs"},
		{"workflows", ws + "/workflows", s.workflowName},
		{"workflow", ws + "/workflows/" + s.workflowID, "Handle order"},
		{"runs", ws + "/runs", s.runID},
		{"runs-filtered", ws + "/runs?status=COMPLETED&workflow=" + s.workflowID, s.runID},
		{"run", "/dashboard/runs/" + s.runID, "Each order"},
		{"executions", ws + "/executions", s.executionID},
		{"execution", ws + "/executions/" + s.executionID, "A-1042"},
		{"api-keys", ws + "/api-keys", "API keys"},
		{"billing", ws + "/billing", "welcome-credit"},
		{"connected-apps", ws + "/connected-apps", "Connected apps"},
		{"members", ws + "/members", s.member.Email},
		{"apps", "/developer/apps", "Register an app"},
	}
}

// TestConsoleFollowsRoles checks over plain HTTP what an owner, a member and an outsider may
// see and do on every page, with forms as a browser without JavaScript posts them.
func TestConsoleFollowsRoles(t *testing.T) {
	s := newStack(t)
	s.seed(t)
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := anon.Get(s.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?return_to=%2F" {
		t.Fatalf("GET / signed out: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	owner, member := s.client(t, s.owner), s.client(t, s.member)
	resp, err = owner.Get(s.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/workspaces/"+s.ws {
		t.Fatalf("GET / signed in: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	ws := "/workspaces/" + s.ws
	for _, p := range s.pages() {
		for who, c := range map[string]*http.Client{"owner": owner, "member": member} {
			st, body := s.get(t, c, p.path)
			if st != http.StatusOK || !strings.Contains(body, p.want) {
				t.Fatalf("%s as %s: %d, want %q in\n%s", p.name, who, st, p.want, body)
			}
			for _, nav := range []string{`id="nav-home"`, `id="nav-workflows"`, `id="nav-runs"`, `id="nav-executions"`, `id="nav-keys"`,
				`id="nav-billing"`, `id="nav-connected"`, `id="nav-members"`, `id="nav-apps"`} {
				if !strings.Contains(body, nav) {
					t.Fatalf("%s as %s: the navigation lacks %s", p.name, who, nav)
				}
			}
			if strings.Contains(body, `id="nav-mcp"`) != (who == "owner") {
				t.Fatalf("%s as %s: MCP tokens in the navigation: %v", p.name, who, strings.Contains(body, `id="nav-mcp"`))
			}
		}
	}

	// A member sees, but changes nothing: each action is refused on the server, in words.
	if st, body := s.get(t, member, ws+"/mcp-tokens"); st != http.StatusForbidden || !strings.Contains(body, "Your role in this workspace (member)") {
		t.Fatalf("MCP tokens as a member: %d %s", st, body)
	}
	for _, a := range []struct {
		path string
		form url.Values
	}{
		{ws + "/api-keys", url.Values{"action": {"create"}, "label": {"sneaky"}}},
		{"/dashboard/runs/" + s.slowRunID + "/cancel", url.Values{}},
		{ws + "/executions/" + s.executionID, url.Values{}},
		{ws + "/members", url.Values{"email": {s.member.Email}, "role": {"owner"}}},
		{ws + "/mcp-tokens", url.Values{"action": {"mint"}, "label": {"x"}}},
	} {
		if st, body := s.post(t, member, a.path, a.form); st != http.StatusForbidden || !strings.Contains(body, "Not allowed") {
			t.Fatalf("POST %s as a member: %d %s", a.path, st, body)
		}
	}
	for _, p := range []string{ws + "/api-keys", "/dashboard/runs/" + s.slowRunID, ws + "/executions/" + s.executionID, ws + "/members"} {
		_, body := s.get(t, member, p)
		for _, form := range []string{`id="create-key"`, `id="cancel-form"`, `id="replay"`, `Add a member`} {
			if strings.Contains(body, form) {
				t.Fatalf("%s shows a member the form %s", p, form)
			}
		}
	}

	// The owner acts: a key's secret is shown once (keys_test.go); forms without the CSRF token
	// are refused.
	if st, body := s.post(t, owner, ws+"/api-keys", url.Values{"action": {"create"}, "label": {"x"}, "expires": {"yesterday"}}); st != http.StatusBadRequest ||
		!strings.Contains(body, "Expires: must be a date") {
		t.Fatalf("a bad expiry: %d %s", st, body)
	}
	if st, body := s.post(t, owner, ws+"/api-keys", url.Values{"csrf_token": {strings.Repeat("x", 43)}, "action": {"create"}}); st != http.StatusForbidden ||
		!strings.Contains(body, "This form has expired") {
		t.Fatalf("a forged form: %d %s", st, body)
	}

	// The owner cancels the slow run; its page then tells the failure in words, not JSON.
	if st, body := s.post(t, owner, "/dashboard/runs/"+s.slowRunID+"/cancel", url.Values{"reason": {"not needed"}}); st != http.StatusSeeOther {
		t.Fatalf("cancel as the owner: %d %s", st, body)
	}
	testenv.Eventually(t, 30*time.Second, "the cancelled run to end", func() bool {
		st, err := s.env.Cmds.Workflows.Run(context.Background(), s.slowRunID)
		return err == nil && st.Status.Terminal()
	})
	if st, body := s.get(t, owner, "/dashboard/runs/"+s.slowRunID); st != http.StatusOK || !strings.Contains(body, "not needed") ||
		strings.Contains(body, "&#34;code&#34;") || strings.Contains(body, `"code"`) {
		t.Fatalf("the cancelled run's page: %d %s", st, body)
	}

	// Failures are pages in words, never JSON.
	outsider := s.client(t, s.person(t, "member"))
	for _, f := range []struct {
		c      *http.Client
		path   string
		status int
		want   string
	}{
		{outsider, ws, http.StatusForbidden, "You are not a member of that workspace"},
		{outsider, "/dashboard/runs/" + s.runID, http.StatusNotFound, "Run not found"},
		{owner, "/workspaces/" + uuid.NewString(), http.StatusForbidden, "You are not a member of that workspace"},
		{owner, ws + "/runs?status=BOGUS", http.StatusBadRequest, "Status: must be one of"},
		{owner, ws + "/executions?page=0", http.StatusBadRequest, "Page: must be an integer"},
		{owner, ws + "/executions/" + uuid.NewString(), http.StatusNotFound, "There is nothing at this address"},
	} {
		st, body := s.get(t, f.c, f.path)
		if st != f.status || !strings.Contains(body, f.want) || strings.Contains(body, `"statusCode"`) {
			t.Fatalf("%s: %d, want %d with %q\n%s", f.path, st, f.status, f.want, body)
		}
	}
}
