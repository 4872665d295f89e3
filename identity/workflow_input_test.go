package identity_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// A definition with a null coordinate, text jsonb cannot store (a lone surrogate in a decoded
// string included: issue 26 item 9), a number beyond PostgreSQL's numeric or nesting past 128
// levels (item 3) is a 400 naming the field, and no workflow is created; so is an app whose
// name holds a lone surrogate.
func TestWorkflowDefinitionInputIsChecked(t *testing.T) {
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	_, login := r.api("POST", "/v1/auth/login", "", map[string]any{"email": owner.Email, "password": testPassword})
	session := login["token"].(string)
	base := "/v1/workspaces/" + ws + "/workflows"
	for _, tc := range []struct{ body, want string }{
		{`{"name": "P", "components": [{"id": "t", "module": "ON_API_CALLED", "position": [1, null]}]}`, "components[0]: position"},
		{`{"name": "N\u0000", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`, "name"},
		{`{"name": "C", "components": [{"id": "t", "module": "ON_API_CALLED", "name": "\ud800"}]}`, "components[0].name"},
		{`{"name": "D", "components": [{"id": "t", "module": "ON_API_CALLED", "config": {"a": "\ud800"}}]}`, "components[0].config.a"},
		{"{\"name\": \"U\", \"components\": [{\"id\": \"t\", \"module\": \"ON_API_CALLED\", \"config\": {\"a\": \"\xff\"}}]}", "components[0].config.a"},
		{`{"name": "E", "components": [{"id": "t", "module": "ON_API_CALLED", "config": {"a": 1e131073}}]}`, "components[0].config.a"},
		{`{"name": "F", "components": [{"id": "t", "module": "ON_API_CALLED", "config": {"a": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}]}`, "components: must not nest"},
		{`{"name": "G", "components": [{"id": "t", "module": "ON_API_CALLED"}], "description": "\udfff"}`, "description"},
	} {
		st, body := r.rawAPI("POST", base, session, tc.body)
		if tc.want == "" {
			if st != http.StatusCreated {
				t.Errorf("%s: %d %v", tc.body, st, body)
			}
			continue
		}
		if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("%.200q: %d %v, want 400 naming %s", tc.body, st, body, tc.want)
		}
	}
	var made int
	if err := r.env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE stream LIKE 'workflow-%'`).Scan(&made); err != nil || made != 0 {
		t.Errorf("refused definitions made %d workflow events (%v)", made, err)
	}
	st, body := r.rawAPI("POST", "/v1/developer/apps", session, `{"name": "App \ud800", "redirectUris": ["https://app.example/cb"], "scopes": ["openid"]}`)
	if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.HasPrefix(msg, "name:") {
		t.Errorf("an app named with a lone surrogate: %d %v", st, body)
	}
}
