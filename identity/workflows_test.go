package identity_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/testenv"
)

// TestWorkflowCRUDOnWorkspaceEndpoints drives workflow create, read, list, update and delete
// through the workspace endpoints with a member's session and an app's read-only token.
func TestWorkflowCRUDOnWorkspaceEndpoints(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 3)
	c := r.app(owner, "openid", "workspace:read")
	readOnly := r.tokens(r.browser(), c, owner, ws, "openid workspace:read")["access_token"].(string)
	_, login := r.api("POST", "/v1/auth/login", "", map[string]any{"email": owner.Email, "password": testPassword})
	session := login["token"].(string)
	def := func(name string) map[string]any {
		var d map[string]any
		_ = json.Unmarshal([]byte(fmt.Sprintf(`{"name": %q, "components": [
			{"id": "t", "module": "ON_API_CALLED", "position": [0, 0]},
			{"id": "a", "module": "core.echo", "position": [100, 50]}],
		  "edges": [{"from": "t", "to": "a"}]}`, name)), &d)
		return d
	}
	base := "/v1/workspaces/" + ws + "/workflows"

	st, wf := r.api("POST", base, session, def("Daily"))
	if st != 201 || wf["id"] == nil || wf["version"] != 1.0 || len(wf["components"].([]any)) != 2 {
		t.Fatalf("create: %d %v", st, wf)
	}
	id := wf["id"].(string)
	if st, body := r.api("POST", base, session, def(" daily ")); st != 409 || !strings.Contains(body["message"].(string), "already exists") {
		t.Fatalf("duplicate name: %d %v", st, body)
	}
	bad := def("Broken")
	bad["edges"] = []any{map[string]any{"from": "t", "to": "ghost"}}
	if st, body := r.api("POST", base, session, bad); st != 400 || !strings.Contains(body["message"].(string), "edges[0].to") {
		t.Fatalf("dangling edge: %d %v", st, body)
	}
	if st, body := r.api("POST", base, session, map[string]any{"name": "x", "components": []any{}, "colour": 1}); st != 400 || !strings.Contains(body["message"].(string), "colour") {
		t.Fatalf("unknown field: %d %v", st, body)
	}
	for field, value := range map[string]any{"position": []any{1}, "attempts": "x", "colour": "red"} {
		bad := def("Bad input")
		bad["components"].([]any)[1].(map[string]any)[field] = value
		st, body := r.api("POST", base, session, bad)
		if msg, _ := body["message"].(string); st != 400 || !strings.Contains(msg, "components[1]") || !strings.Contains(msg, field) {
			t.Fatalf("bad %s: %d %v", field, st, body)
		}
	}
	if st, _ := r.api("POST", base, readOnly, def("Nope")); st != 403 {
		t.Fatalf("create with workspace:read: %d", st)
	}
	if st, got := r.api("GET", base+"/"+id, readOnly, nil); st != 200 || got["name"] != "Daily" {
		t.Fatalf("get: %d %v", st, got)
	}
	testenv.Eventually(t, 10*time.Second, "the list to show the workflow", func() bool {
		st, list := r.api("GET", base+"?limit=10", readOnly, nil)
		return st == 200 && list["total"] == 1.0 && list["data"].([]any)[0].(map[string]any)["name"] == "Daily"
	})
	if st, got := r.api("PUT", base+"/"+id, session, def("Weekly")); st != 200 || got["name"] != "Weekly" || got["version"] != 2.0 {
		t.Fatalf("update: %d %v", st, got)
	}
	// The old name is free again after the rename.
	if st, _ := r.api("POST", base, session, def("Daily")); st != 201 {
		t.Fatalf("reusing a released name: %d", st)
	}
	if st, _ := r.api("PUT", base+"/"+id, readOnly, def("Monthly")); st != 403 {
		t.Fatalf("update with workspace:read: %d", st)
	}
	if st, _ := r.api("DELETE", base+"/"+id, session, nil); st != 204 {
		t.Fatalf("delete: %d", st)
	}
	if st, _ := r.api("GET", base+"/"+id, session, nil); st != 404 {
		t.Fatalf("get after delete: %d", st)
	}
	if st, _ := r.api("DELETE", base+"/"+id, session, nil); st != 404 {
		t.Fatalf("second delete: %d", st)
	}
	other := r.workspace(owner, 1)
	if st, _ := r.api("GET", "/v1/workspaces/"+other+"/workflows/"+id, session, nil); st != 404 {
		t.Fatalf("another workspace's workflow: %d", st)
	}
}
