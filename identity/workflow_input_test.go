package identity_test

import (
	"net/http"
	"strings"
	"testing"
)

// A definition with a null coordinate, or text jsonb cannot store, is a 400 naming the field,
// and no workflow is created.
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
		{`{"name": "C", "components": [{"id": "t", "module": "ON_API_CALLED", "name": "\ud800"}]}`, ""}, // a lone surrogate in a decoded string becomes U+FFFD: storable
		{`{"name": "D", "components": [{"id": "t", "module": "ON_API_CALLED", "config": {"a": "\ud800"}}]}`, `components[0] (component "t").config`},
		{"{\"name\": \"U\", \"components\": [{\"id\": \"t\", \"module\": \"ON_API_CALLED\", \"config\": {\"a\": \"\xff\"}}]}", `components[0] (component "t").config`},
	} {
		st, body := r.rawAPI("POST", base, session, tc.body)
		if tc.want == "" {
			if st != http.StatusCreated {
				t.Errorf("%s: %d %v", tc.body, st, body)
			}
			continue
		}
		if msg, _ := body["message"].(string); st != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: %d %v, want 400 naming %s", tc.body, st, body, tc.want)
		}
	}
}
