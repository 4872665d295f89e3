package httperr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/web/httperr"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		msg    string
		ok     bool
	}{
		{fmt.Errorf("submit: %w", domain.Invalid("input", "must be an object")), 400, "input: must be an object", true},
		{fmt.Errorf("run x: %w", domain.ErrNotFound), 404, "not found", true},
		{domain.Conflict("workflow name %q is taken", "a"), 409, `workflow name "a" is taken`, true},
		{fmt.Errorf("wrapped: %w", domain.ErrAlreadyExists), 409, "already exists", true},
		{fmt.Errorf("raw conflict with detail: %w", domain.ErrConflict), 409, "conflict", true},
		{domain.ErrInsufficientCredits, 402, "insufficient credits", true},
		{access.ErrNotMember, 403, "not a member of this workspace", true},
		{&access.ScopeError{Scope: access.ScopeAPIKeys}, 403, "missing scope workspace:api_keys", true},
		{fmt.Errorf("forbidden with internals: %w", domain.ErrForbidden), 403, "forbidden", true},
		{errors.New("connection reset by peer at 10.0.0.7"), 500, "internal error", false},
	} {
		status, msg, ok := httperr.Classify(tc.err)
		if status != tc.status || msg != tc.msg || ok != tc.ok {
			t.Errorf("%v: got %d %q %v, want %d %q %v", tc.err, status, msg, ok, tc.status, tc.msg, tc.ok)
		}
	}
}

func TestWriteErrHasTheSpecBody(t *testing.T) {
	rec := httptest.NewRecorder()
	httperr.WriteErr(rec, nil, errors.New("secret internals"))
	var b httperr.Body
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != 500 || b.StatusCode != 500 ||
		b.Message != "internal error" || b.Error != http.StatusText(500) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}
