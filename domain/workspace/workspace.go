// Package workspace is the workspace aggregate: a named space with members in roles.
package workspace

import (
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

func init() { domain.Events.Register(Created{}, MemberAdded{}) }

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
		m := make(map[string]string, len(s.Members)+1)
		for k, v := range s.Members {
			m[k] = v
		}
		m[ev.UserID] = ev.Role
		s.Members = m
	}
	return s
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

// DecideAddMember adds a user or changes their role; an unchanged role adds nothing.
func DecideAddMember(s State, userID, role string, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	if !ValidRole(role) {
		return nil, domain.Invalid("role", "must be owner, admin or member")
	}
	if s.Members[userID] == role {
		return nil, nil
	}
	return []domain.Event{MemberAdded{WorkspaceID: s.ID, UserID: userID, Role: role, At: now.UTC()}}, nil
}
