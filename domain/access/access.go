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

// workspaceScope reports whether scope is a power in a workspace (as opposed to the person's
// own identity scopes: openid, profile, email, offline_access).
func workspaceScope(scope string) bool { return strings.HasPrefix(scope, "workspace:") }

// RoleHolds reports whether a member with role holds scope: a workspace scope only when the
// role's scopes satisfy it; the identity scopes belong to the person, whatever the role.
func RoleHolds(role, scope string) bool {
	return !workspaceScope(scope) || Satisfies(RoleScopes(role), scope)
}

// WithinRole splits the scopes an app requests into those a member with role may grant it and
// those beyond the role, which consent drops: no one hands an app more than they hold.
func WithinRole(role string, requested []string) (granted, beyond []string) {
	for _, s := range requested {
		if RoleHolds(role, s) {
			granted = append(granted, s)
		} else {
			beyond = append(beyond, s)
		}
	}
	return granted, beyond
}

// Effective is what a token's granted scopes allow now that its user has role in the
// workspace: each granted scope the role still holds, and for one it no longer holds, the
// narrower powers of the role that scope covered (an admin's workspace:admin token of a member
// now reads). A role of "" (no longer a member) keeps no workspace scope.
func Effective(granted []string, role string) []string {
	held := RoleScopes(role)
	out := []string{}
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range granted {
		if RoleHolds(role, s) {
			add(s)
			continue
		}
		for _, h := range held {
			if Satisfies([]string{s}, h) {
				add(h)
			}
		}
	}
	return out
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

// Rights are what a check allowed: the caller's role (sessions only) and scopes in the
// workspace. (An OAuth authorization, which grants an app scopes, is domain/authorization.)
type Rights struct {
	Role   string
	Scopes []string
}

// Allows reports whether the rights cover required.
func (g Rights) Allows(required string) bool { return Satisfies(g.Scopes, required) }

// Manages reports whether the rights let their holder change the workspace.
func (g Rights) Manages() bool { return g.Allows(ScopeWorkspaceAdmin) }

// Check decides whether c may act in ws with required ("" for membership alone): a session
// acts with its member's role (ErrNotMember when it has none, also for a workspace that does
// not exist, so ids cannot be probed); a token acts only on its own workspace (SPEC.md 5
// rule 6), with the scopes it was granted that its user's current role still holds
// (Effective), so a demotion or a removal counts on the token's next call.
func Check(ws workspace.State, c Caller, required string) (Rights, error) {
	if !c.Session && (c.WorkspaceID == "" || c.WorkspaceID != ws.ID) {
		return Rights{}, ErrWrongWorkspace
	}
	g := Rights{Role: ws.Members[c.UserID]}
	if !ws.Exists || c.UserID == "" || g.Role == "" {
		return Rights{}, ErrNotMember
	}
	if c.Session {
		g.Scopes = RoleScopes(g.Role)
	} else {
		g.Scopes = Effective(c.Scopes, g.Role)
	}
	if required != "" && !g.Allows(required) {
		return Rights{}, &ScopeError{Scope: required}
	}
	return g, nil
}

// MayGrant reports whether a member with role granter may give someone role: owners any role,
// admins admin or member, members none (workspace.MayGrant, which the member decisions apply).
func MayGrant(granter, role string) bool { return workspace.MayGrant(granter, role) }
