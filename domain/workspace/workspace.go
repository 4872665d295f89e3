// Package workspace is the workspace aggregate: a named space with members in roles.
package workspace

import (
	"fmt"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of workspaces: workspace-<id>.
const Category = "workspace"

// Roles a member can hold, from most to least powerful.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// Created records a new workspace.
type Created struct {
	WorkspaceID string    `json:"workspaceId"`
	Name        string    `json:"name"`
	OwnerUserID string    `json:"ownerUserId"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (Created) EventType() string { return "WorkspaceCreated" }

// MemberAdded gives a user a role in the workspace.
type MemberAdded struct {
	WorkspaceID string    `json:"workspaceId"`
	UserID      string    `json:"userId"`
	Role        string    `json:"role"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (MemberAdded) EventType() string { return "MemberAdded" }

// MemberRoleChanged gives a member another role. By is the member who changed it; empty when
// an operator did, at the command line.
type MemberRoleChanged struct {
	WorkspaceID string    `json:"workspaceId"`
	UserID      string    `json:"userId"`
	From        string    `json:"from"`
	Role        string    `json:"role"`
	By          string    `json:"by,omitempty"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (MemberRoleChanged) EventType() string { return "MemberRoleChanged" }

// MemberRemoved takes a member out of the workspace. By is as MemberRoleChanged's.
type MemberRemoved struct {
	WorkspaceID string    `json:"workspaceId"`
	UserID      string    `json:"userId"`
	Role        string    `json:"role"`
	By          string    `json:"by,omitempty"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (MemberRemoved) EventType() string { return "MemberRemoved" }

func init() { domain.Events.Register(Created{}, MemberAdded{}, MemberRoleChanged{}, MemberRemoved{}) }

// State is a workspace folded from its stream.
type State struct {
	Exists  bool
	ID      string
	Name    string
	Members map[string]string // user id -> role
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Created:
		s.Exists, s.ID, s.Name = true, ev.WorkspaceID, ev.Name
		s.Members = map[string]string{}
	case MemberAdded:
		s.Members = s.withMember(ev.UserID, ev.Role)
	case MemberRoleChanged:
		s.Members = s.withMember(ev.UserID, ev.Role)
	case MemberRemoved:
		s.Members = s.withMember(ev.UserID, "")
	}
	return s
}

// withMember is a copy of the members with userID in role, or without userID when role is
// empty: states are values, and an earlier state may still be read.
func (s State) withMember(userID, role string) map[string]string {
	m := make(map[string]string, len(s.Members)+1)
	for k, v := range s.Members {
		m[k] = v
	}
	if role == "" {
		delete(m, userID)
	} else {
		m[userID] = role
	}
	return m
}

// Owners counts the members who are owners.
func (s State) Owners() int {
	n := 0
	for _, r := range s.Members {
		if r == RoleOwner {
			n++
		}
	}
	return n
}

// Create is the command to create a workspace owned by an existing user.
type Create struct {
	WorkspaceID string
	Name        string
	OwnerUserID string
}

// ValidateName checks a workspace display name.
func ValidateName(name string) error {
	n := strings.TrimSpace(name)
	if n == "" {
		return domain.Invalid("name", "is required")
	}
	if len(n) > 100 {
		return domain.Invalid("name", "must be at most 100 characters")
	}
	return nil
}

// DecideCreate creates the workspace and makes its creator the owner.
func DecideCreate(s State, c Create, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if err := ValidateName(c.Name); err != nil {
		return nil, err
	}
	if c.OwnerUserID == "" {
		return nil, domain.Invalid("owner", "is required")
	}
	at := now.UTC()
	return []domain.Event{
		Created{WorkspaceID: c.WorkspaceID, Name: strings.TrimSpace(c.Name), OwnerUserID: c.OwnerUserID, At: at},
		MemberAdded{WorkspaceID: c.WorkspaceID, UserID: c.OwnerUserID, Role: RoleOwner, At: at},
	}, nil
}

// ValidRole reports whether role is one a member can hold.
func ValidRole(role string) bool {
	return role == RoleOwner || role == RoleAdmin || role == RoleMember
}

// MayGrant reports whether a member with role granter may give someone role: owners give any
// role, admins give admin or member, members none.
func MayGrant(granter, role string) bool {
	switch granter {
	case RoleOwner:
		return ValidRole(role)
	case RoleAdmin:
		return role == RoleAdmin || role == RoleMember
	}
	return false
}

// ErrAlreadyMember is an add of someone who is a member already: their role changes only
// through DecideChangeRole.
var ErrAlreadyMember = domain.Conflict("already a member of this workspace; change their role instead")

// ErrLastOwner refuses to leave a workspace without an owner.
var ErrLastOwner = domain.Conflict("the workspace's last owner can be neither demoted nor removed; make someone else an owner first")

// DecideAddMember adds a user who is not a member yet; a member already is ErrAlreadyMember.
func DecideAddMember(s State, userID, role string, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	if !ValidRole(role) {
		return nil, domain.Invalid("role", "must be owner, admin or member")
	}
	if s.Members[userID] != "" {
		return nil, ErrAlreadyMember
	}
	return []domain.Event{MemberAdded{WorkspaceID: s.ID, UserID: userID, Role: role, At: now.UTC()}}, nil
}

// Actor is who changes the members: a member of the workspace (By, their user id), or the
// operator at the command line (Operator), who holds every role's power.
type Actor struct {
	By       string
	Operator bool
}

// ChangeRole is the command to give a member another role.
type ChangeRole struct {
	Actor  Actor
	UserID string
	Role   string
}

// DecideChangeRole gives a member another role. An owner's role is changed only by an owner
// (or the operator), a role is given only by someone who may grant it (MayGrant), and the last
// owner keeps their role. The same role again changes nothing.
func DecideChangeRole(s State, c ChangeRole, now time.Time) ([]domain.Event, error) {
	if !ValidRole(c.Role) {
		return nil, domain.Invalid("role", "must be owner, admin or member")
	}
	from, err := s.mayChange(c.Actor, c.UserID)
	if err != nil {
		return nil, err
	}
	if from == c.Role {
		return nil, nil
	}
	if !c.Actor.Operator && !MayGrant(s.Members[c.Actor.By], c.Role) {
		return nil, domain.Forbidden("your role (%s) cannot give the role %s", s.Members[c.Actor.By], c.Role)
	}
	if from == RoleOwner && s.Owners() == 1 {
		return nil, ErrLastOwner
	}
	return []domain.Event{MemberRoleChanged{WorkspaceID: s.ID, UserID: c.UserID, From: from, Role: c.Role, By: c.Actor.By, At: now.UTC()}}, nil
}

// RemoveMember is the command to take a member out of the workspace.
type RemoveMember struct {
	Actor  Actor
	UserID string
}

// DecideRemoveMember takes a member out, under DecideChangeRole's rules: only owners remove an
// owner, and never the last one.
func DecideRemoveMember(s State, c RemoveMember, now time.Time) ([]domain.Event, error) {
	from, err := s.mayChange(c.Actor, c.UserID)
	if err != nil {
		return nil, err
	}
	if from == RoleOwner && s.Owners() == 1 {
		return nil, ErrLastOwner
	}
	return []domain.Event{MemberRemoved{WorkspaceID: s.ID, UserID: c.UserID, Role: from, By: c.Actor.By, At: now.UTC()}}, nil
}

// mayChange checks that the actor may change the member userID at all and returns the
// member's role: the actor manages the workspace, and only an owner changes an owner.
func (s State) mayChange(a Actor, userID string) (string, error) {
	if !s.Exists {
		return "", domain.ErrNotFound
	}
	from := s.Members[userID]
	if from == "" {
		return "", fmt.Errorf("member %s: %w", userID, domain.ErrNotFound)
	}
	if a.Operator {
		return from, nil
	}
	by := s.Members[a.By]
	switch {
	case by != RoleOwner && by != RoleAdmin:
		return "", domain.Forbidden("only owners and admins change the members")
	case from == RoleOwner && by != RoleOwner:
		return "", domain.Forbidden("only an owner changes an owner's role")
	}
	return from, nil
}
