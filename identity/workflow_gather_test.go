package identity_test

import (
	"net/http"
	"strings"
	"testing"
)

// A FOR_EACH's config.body is checked when the workflow is saved: a body naming a component not
// downstream of its FOR_EACH, a FOR_EACH nested two levels deep, or a condition on a gather
// edge is a 400 naming the part, on create and on replace; one level of nesting is accepted.
func TestWorkflowForEachBodyIsCheckedOnSave(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	_, login := r.api("POST", "/v1/auth/login", "", map[string]any{"email": owner.Email, "password": testPassword})
	session := login["token"].(string)
	base := "/v1/workspaces/" + ws + "/workflows"
	def := func(name, body, extra, edges string) string {
		return `{"name": "` + name + `", "components": [{"id": "t", "module": "ON_API_CALLED"},
			{"id": "each", "module": "FOR_EACH", "config": {"items": "xs", "body": ` + body + `}},
			{"id": "a", "module": "core.echo"}, {"id": "g", "module": "core.echo"}` + extra + `],
		  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "a"}` + edges + `]}`
	}
	st, created := r.rawAPI("POST", base, session, def("Good", `["a"]`, "", `, {"from": "a", "to": "g"}`))
	if st != http.StatusCreated {
		t.Fatalf("a good body: %d %v", st, created)
	}
	st, nested := r.rawAPI("POST", base, session, def("Nested", `["a", "inner", "b"]`,
		`, {"id": "inner", "module": "FOR_EACH", "config": {"items": "ys", "body": ["b"]}}, {"id": "b", "module": "core.echo"}`,
		`, {"from": "a", "to": "g"}, {"from": "a", "to": "inner"}, {"from": "inner", "to": "b"}`))
	if st != http.StatusCreated {
		t.Fatalf("one level of nesting: %d %v", st, nested)
	}
	for _, tc := range []struct{ name, def, want string }{
		{"not downstream", def("Bad", `["a", "u"]`, `, {"id": "u", "module": "core.echo"}`, `, {"from": "a", "to": "g"}, {"from": "t", "to": "u"}`),
			`components[1] (component "each").config.body[1]: component "u" is not downstream of FOR_EACH "each"`},
		{"two levels of nesting", def("Bad", `["a", "inner", "deep", "b"]`,
			`, {"id": "inner", "module": "FOR_EACH", "config": {"items": "ys"}}, {"id": "deep", "module": "FOR_EACH", "config": {"items": "zs"}}, {"id": "b", "module": "core.echo"}`,
			`, {"from": "a", "to": "g"}, {"from": "a", "to": "inner"}, {"from": "inner", "to": "deep"}, {"from": "deep", "to": "b"}`),
			`components[5] (component "deep"): a FOR_EACH nested two levels deep`},
		{"condition on a gather edge", def("Bad", `["a"]`, "", `, {"from": "a", "to": "g", "when": "true"}`), "edges[2].when"},
	} {
		for _, call := range []struct{ method, path string }{{"POST", base}, {"PUT", base + "/" + created["id"].(string)}} {
			st, body := r.rawAPI(call.method, call.path, session, tc.def)
			if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
				t.Errorf("%s %s: %d %v, want 400 naming %s", call.method, tc.name, st, body, tc.want)
			}
		}
	}
}
