// Package access holds Switchyard's access-control rules in one place: the scopes the service
// checks, what each workspace role may do, and the check every surface (the /v1 workspace
// endpoints, MCP, the console, the run page) makes before acting on a workspace. It decides
// from values (a workspace's state and who asks); loading them is the caller's job.
package access

import (
	"slices"
	"strings"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workspace"
)

// Scope names the service's own endpoints check (SPEC.md 5 rule 7).
const (
	ScopeOpenID         = "openid"
	ScopeProfile        = "profile"
	ScopeEmail          = "email"
	ScopeWorkspaceRead  = "workspace:read"
	ScopeReadBilling    = "workspace:read.billing"
	ScopeAPIKeys        = "workspace:api_keys"
	ScopeWorkspaceAdmin = "workspace:admin"
)

// Satisfies reports whether granted scopes allow an action that needs required:
// workspace:admin satisfies every workspace scope (SPEC.md 4.9).
func Satisfies(granted []string, required string) bool {
	if slices.Contains(granted, required) {
		return true
	}
	return strings.HasPrefix(required, "workspace:") && slices.Contains(granted, ScopeWorkspaceAdmin)
}

// RoleScopes are the scopes a member of a workspace acts with in a session (the console, or a
// session JWT on /v1): owners and admins have every power, members read (billing included).
// An unknown role has none.
func RoleScopes(role string) []string {
	switch role {
	case workspace.RoleOwner, workspace.RoleAdmin:
		return []string{ScopeWorkspaceAdmin}
	case workspace.RoleMember:
		return []string{ScopeWorkspaceRead, ScopeReadBilling}
	}
	return nil
}

// Manages reports whether role may change the workspace (keys, tokens, workflows, runs, other
// members' connections): owners and admins.
func Manages(role string) bool { return Satisfies(RoleScopes(role), ScopeWorkspaceAdmin) }

// Caller is who asks to act on a workspace: a signed-in person (Session, with UserID) or an
// app's access token or other credential bound to one workspace with scopes.
type Caller struct {
	UserID      string
	Session     bool
	WorkspaceID string
	Scopes      []string
}

// Sentinel errors of a refused check. Each wraps domain.ErrForbidden, so the one HTTP mapping
// answers 403 with the message.
var (
	ErrNotMember      = domain.Forbidden("not a member of this workspace")
	ErrWrongWorkspace = domain.Forbidden("the token is not valid for this workspace")
)

// ScopeError refuses a caller that lacks a scope; it is a 403 naming the scope.
type ScopeError struct{ Scope string }

func (e *ScopeError) Error() string { return "missing scope " + e.Scope }

// Unwrap makes errors.Is(err, domain.ErrForbidden) match, with the message as the refusal's.
func (e *ScopeError) Unwrap() error { return &domain.ForbiddenError{Message: e.Error()} }

// Grant is what a check allowed: the caller's role (sessions only) and scopes in the workspace.
type Grant struct {
	Role   string
	Scopes []string
}

// Allows reports whether the grant covers required.
func (g Grant) Allows(required string) bool { return Satisfies(g.Scopes, required) }

// Manages reports whether the grant lets its holder change the workspace.
func (g Grant) Manages() bool { return g.Allows(ScopeWorkspaceAdmin) }

// Check decides whether c may act in ws with required ("" for membership alone): a session
// acts with its member's role (ErrNotMember when it has none, also for a workspace that does
// not exist, so ids cannot be probed); a token acts only on its own workspace (SPEC.md 5
// rule 6), with its scopes. For a token only ws.ID is read: its workspace was checked when it
// was granted.
func Check(ws workspace.State, c Caller, required string) (Grant, error) {
	var g Grant
	if c.Session {
		g.Role = ws.Members[c.UserID]
		if !ws.Exists || g.Role == "" {
			return Grant{}, ErrNotMember
		}
		g.Scopes = RoleScopes(g.Role)
	} else {
		if c.WorkspaceID == "" || c.WorkspaceID != ws.ID {
			return Grant{}, ErrWrongWorkspace
		}
		g.Scopes = c.Scopes
	}
	if required != "" && !g.Allows(required) {
		return Grant{}, &ScopeError{Scope: required}
	}
	return g, nil
}

// MayGrant reports whether a member with role granter may give someone role: owners any role,
// admins admin or member, members none (workspace.MayGrant, which the member decisions apply).
func MayGrant(granter, role string) bool { return workspace.MayGrant(granter, role) }
