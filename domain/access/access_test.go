package access_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/workspace"
)

func TestCheck(t *testing.T) {
	ws := workspace.State{Exists: true, ID: "w1", Members: map[string]string{"o": "owner", "a": "admin", "m": "member"}}
	session := func(u string) access.Caller { return access.Caller{UserID: u, Session: true} }
	token := func(u string, scopes ...string) access.Caller {
		return access.Caller{UserID: u, WorkspaceID: "w1", Scopes: scopes}
	}
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
		{"token of the workspace", ws, token("o", access.ScopeWorkspaceRead), access.ScopeWorkspaceRead, false, nil},
		{"token lacking the scope", ws, token("o", access.ScopeWorkspaceRead), access.ScopeAPIKeys, false, domain.ErrForbidden},
		{"token of another workspace", ws, access.Caller{UserID: "o", WorkspaceID: "w2", Scopes: []string{access.ScopeWorkspaceAdmin}}, "", false, access.ErrWrongWorkspace},
		{"token without a workspace", workspace.State{}, access.Caller{UserID: "o", Scopes: []string{access.ScopeWorkspaceAdmin}}, "", false, access.ErrWrongWorkspace},
		{"admin token of an admin", ws, token("a", access.ScopeWorkspaceAdmin), access.ScopeAPIKeys, true, nil},
		{"admin token of a member", ws, token("m", access.ScopeWorkspaceAdmin), access.ScopeWorkspaceAdmin, false, domain.ErrForbidden},
		{"api_keys token of a member", ws, token("m", access.ScopeAPIKeys), access.ScopeAPIKeys, false, domain.ErrForbidden},
		{"admin token of a member reads", ws, token("m", access.ScopeWorkspaceAdmin), access.ScopeReadBilling, false, nil},
		{"token of a removed member", ws, token("x", access.ScopeWorkspaceRead), "", false, access.ErrNotMember},
		{"token with no user", ws, access.Caller{WorkspaceID: "w1", Scopes: []string{access.ScopeWorkspaceRead}}, "", false, access.ErrNotMember},
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

func TestWithinRole(t *testing.T) {
	requested := []string{"openid", "email", access.ScopeWorkspaceRead, access.ScopeReadBilling, access.ScopeAPIKeys, access.ScopeWorkspaceAdmin}
	for _, tc := range []struct {
		role            string
		granted, beyond string
	}{
		{"owner", "openid email workspace:read workspace:read.billing workspace:api_keys workspace:admin", ""},
		{"admin", "openid email workspace:read workspace:read.billing workspace:api_keys workspace:admin", ""},
		{"member", "openid email workspace:read workspace:read.billing", "workspace:api_keys workspace:admin"},
		{"", "openid email", "workspace:read workspace:read.billing workspace:api_keys workspace:admin"},
	} {
		g, b := access.WithinRole(tc.role, requested)
		if strings.Join(g, " ") != tc.granted || strings.Join(b, " ") != tc.beyond {
			t.Errorf("WithinRole(%q) = %v, %v; want %q, %q", tc.role, g, b, tc.granted, tc.beyond)
		}
	}
}

func TestEffective(t *testing.T) {
	for _, tc := range []struct {
		granted []string
		role    string
		want    string
	}{
		{[]string{"openid", access.ScopeWorkspaceAdmin}, "admin", "openid workspace:admin"},
		{[]string{"openid", access.ScopeWorkspaceAdmin}, "member", "openid workspace:read workspace:read.billing"},
		{[]string{access.ScopeAPIKeys, access.ScopeWorkspaceRead}, "member", "workspace:read"},
		{[]string{access.ScopeWorkspaceRead}, "owner", "workspace:read"},
		{[]string{"email", access.ScopeWorkspaceAdmin}, "", "email"},
		{nil, "owner", ""},
	} {
		if got := strings.Join(access.Effective(tc.granted, tc.role), " "); got != tc.want {
			t.Errorf("Effective(%v, %q) = %q, want %q", tc.granted, tc.role, got, tc.want)
		}
	}
}
