package access_test

import (
	"errors"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/workspace"
)

func TestCheck(t *testing.T) {
	ws := workspace.State{Exists: true, ID: "w1", Members: map[string]string{"o": "owner", "a": "admin", "m": "member"}}
	session := func(u string) access.Caller { return access.Caller{UserID: u, Session: true} }
	for _, tc := range []struct {
		name     string
		ws       workspace.State
		c        access.Caller
		required string
		manages  bool
		err      error
	}{
		{"owner administers", ws, session("o"), access.ScopeWorkspaceAdmin, true, nil},
		{"admin administers", ws, session("a"), access.ScopeAPIKeys, true, nil},
		{"member reads", ws, session("m"), access.ScopeWorkspaceRead, false, nil},
		{"member reads billing", ws, session("m"), access.ScopeReadBilling, false, nil},
		{"member may not administer", ws, session("m"), access.ScopeWorkspaceAdmin, false, domain.ErrForbidden},
		{"member may not mint keys", ws, session("m"), access.ScopeAPIKeys, false, domain.ErrForbidden},
		{"stranger", ws, session("x"), "", false, access.ErrNotMember},
		{"unknown workspace", workspace.State{ID: "w2"}, session("o"), "", false, access.ErrNotMember},
		{"token of the workspace", ws, access.Caller{WorkspaceID: "w1", Scopes: []string{access.ScopeWorkspaceRead}}, access.ScopeWorkspaceRead, false, nil},
		{"token lacking the scope", ws, access.Caller{WorkspaceID: "w1", Scopes: []string{access.ScopeWorkspaceRead}}, access.ScopeAPIKeys, false, domain.ErrForbidden},
		{"token of another workspace", ws, access.Caller{WorkspaceID: "w2", Scopes: []string{access.ScopeWorkspaceAdmin}}, "", false, access.ErrWrongWorkspace},
		{"token without a workspace", workspace.State{}, access.Caller{Scopes: []string{access.ScopeWorkspaceAdmin}}, "", false, access.ErrWrongWorkspace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := access.Check(tc.ws, tc.c, tc.required)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err == nil && g.Manages() != tc.manages {
				t.Fatalf("manages = %v, want %v", g.Manages(), tc.manages)
			}
		})
	}
}

func TestScopeErrorNamesTheScope(t *testing.T) {
	_, err := access.Check(workspace.State{Exists: true, ID: "w", Members: map[string]string{"m": "member"}},
		access.Caller{UserID: "m", Session: true}, access.ScopeWorkspaceAdmin)
	var fe *domain.ForbiddenError
	if !errors.As(err, &fe) || fe.Message != "missing scope workspace:admin" {
		t.Fatalf("err = %v", err)
	}
}

func TestMayGrant(t *testing.T) {
	for _, tc := range []struct {
		granter, role string
		ok            bool
	}{
		{"owner", "owner", true}, {"owner", "member", true}, {"admin", "admin", true}, {"admin", "owner", false},
		{"member", "member", false}, {"owner", "root", false},
	} {
		if got := access.MayGrant(tc.granter, tc.role); got != tc.ok {
			t.Errorf("MayGrant(%s, %s) = %v", tc.granter, tc.role, got)
		}
	}
}
