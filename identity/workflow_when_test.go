package identity_test

import (
	"net/http"
	"strings"
	"testing"
)

// An edge's `when` is compiled when the workflow is saved: one that does not compile, is not a
// boolean, or sits on an edge out of a FOR_EACH is a 400 naming the edge, on create and on
// replace; a good one is stored and shown.
func TestWorkflowWhenIsCompiledOnSave(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	_, login := r.api("POST", "/v1/auth/login", "", map[string]any{"email": owner.Email, "password": testPassword})
	session := login["token"].(string)
	base := "/v1/workspaces/" + ws + "/workflows"
	def := func(name, edges string) string {
		return `{"name": "` + name + `", "components": [{"id": "t", "module": "ON_API_CALLED"},
			{"id": "e", "module": "FOR_EACH", "config": {"items": "xs"}}, {"id": "a", "module": "core.echo"}],
		  "edges": [` + edges + `]}`
	}
	st, created := r.rawAPI("POST", base, session, def("Good", `{"from": "t", "to": "e", "when": "trigger.go == true"}, {"from": "e", "to": "a"}`))
	edges, _ := created["edges"].([]any)
	if st != http.StatusCreated || len(edges) != 2 || edges[0].(map[string]any)["when"] != "trigger.go == true" {
		t.Fatalf("a good when: %d %v", st, created)
	}
	for _, tc := range []struct{ edges, want string }{
		{`{"from": "t", "to": "e"}, {"from": "e", "to": "a"}, {"from": "t", "to": "a", "when": "output.score >"}`, "edges[2].when: expression error"},
		{`{"from": "t", "to": "e", "when": "len(trigger.xs) + 1"}, {"from": "e", "to": "a"}`, "edges[0].when: expression error"},
		{`{"from": "t", "to": "e"}, {"from": "e", "to": "a", "when": "true"}`, "edges[1].when"},
		{`{"from": "t", "to": "e", "when": 1}, {"from": "e", "to": "a"}`, "edges[0]"},
	} {
		for _, call := range []struct{ method, path string }{{"POST", base}, {"PUT", base + "/" + created["id"].(string)}} {
			st, body := r.rawAPI(call.method, call.path, session, def("Bad", tc.edges))
			if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
				t.Errorf("%s %s: %d %v, want 400 naming %s", call.method, tc.edges, st, body, tc.want)
			}
		}
	}
}
