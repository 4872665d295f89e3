package workspace

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestCreateAndMembers(t *testing.T) {
	evs, err := DecideCreate(State{}, Create{WorkspaceID: "w1", Name: " Acme ", OwnerUserID: "u1"}, now)
	if err != nil || len(evs) != 2 {
		t.Fatalf("create: %v %v", evs, err)
	}
	var s State
	for _, e := range evs {
		s = s.Evolve(e)
	}
	if s.Name != "Acme" || s.Members["u1"] != RoleOwner {
		t.Fatalf("state %+v", s)
	}
	if _, err := DecideCreate(s, Create{WorkspaceID: "w1", Name: "x", OwnerUserID: "u1"}, now); !errors.Is(err, domain.ErrAlreadyExists) {
		t.Fatalf("recreate: %v", err)
	}
	evs, err = DecideAddMember(s, "u2", RoleMember, now)
	if err != nil || len(evs) != 1 {
		t.Fatalf("add: %v %v", evs, err)
	}
	s = s.Evolve(evs[0])
	if _, err := DecideAddMember(s, "u2", RoleMember, now); !errors.Is(err, ErrAlreadyMember) {
		t.Fatalf("adding a member again: %v", err)
	}
	if _, err := DecideAddMember(s, "u3", "king", now); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("bad role: %v", err)
	}
	if _, err := DecideAddMember(State{}, "u3", RoleMember, now); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("no workspace: %v", err)
	}
	for _, name := range []string{"", "   "} {
		if _, err := DecideCreate(State{}, Create{WorkspaceID: "w", Name: name, OwnerUserID: "u"}, now); !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("name %q: %v", name, err)
		}
	}
}

// team is a workspace with one owner, an admin and a member, and a second owner when
// twoOwners is set.
func team(twoOwners bool) State {
	m := map[string]string{"o1": RoleOwner, "a": RoleAdmin, "m": RoleMember}
	if twoOwners {
		m["o2"] = RoleOwner
	}
	return State{Exists: true, ID: "w", Name: "Acme", Members: m}
}

func TestAddingAMemberNeverChangesARole(t *testing.T) {
	for _, role := range []string{RoleOwner, RoleAdmin, RoleMember} {
		for _, who := range []string{"o1", "a", "m"} {
			if _, err := DecideAddMember(team(false), who, role, now); !errors.Is(err, ErrAlreadyMember) || !errors.Is(err, domain.ErrConflict) {
				t.Fatalf("add %s as %s: %v", who, role, err)
			}
		}
	}
}

func TestChangeRole(t *testing.T) {
	by := func(u string) Actor { return Actor{By: u} }
	operator := Actor{Operator: true}
	for _, tc := range []struct {
		name      string
		s         State
		c         ChangeRole
		err       error
		unchanged bool
	}{
		{"an owner makes a member admin", team(false), ChangeRole{by("o1"), "m", RoleAdmin}, nil, false},
		{"an owner makes a member owner", team(false), ChangeRole{by("o1"), "m", RoleOwner}, nil, false},
		{"an admin makes a member admin", team(false), ChangeRole{by("a"), "m", RoleAdmin}, nil, false},
		{"an admin demotes an admin", team(false), ChangeRole{by("a"), "a", RoleMember}, nil, false},
		{"an admin cannot make an owner", team(false), ChangeRole{by("a"), "m", RoleOwner}, domain.ErrForbidden, false},
		{"an admin cannot demote the owner", team(false), ChangeRole{by("a"), "o1", RoleMember}, domain.ErrForbidden, false},
		{"an admin cannot demote one of two owners", team(true), ChangeRole{by("a"), "o2", RoleAdmin}, domain.ErrForbidden, false},
		{"a member changes nothing", team(false), ChangeRole{by("m"), "m", RoleAdmin}, domain.ErrForbidden, false},
		{"a stranger changes nothing", team(false), ChangeRole{by("x"), "m", RoleAdmin}, domain.ErrForbidden, false},
		{"the last owner cannot demote themself", team(false), ChangeRole{by("o1"), "o1", RoleAdmin}, ErrLastOwner, false},
		{"the operator cannot demote the last owner", team(false), ChangeRole{operator, "o1", RoleMember}, ErrLastOwner, false},
		{"an owner demotes another owner", team(true), ChangeRole{by("o1"), "o2", RoleMember}, nil, false},
		{"an owner of two steps down", team(true), ChangeRole{by("o1"), "o1", RoleAdmin}, nil, false},
		{"the operator makes an owner", team(false), ChangeRole{operator, "m", RoleOwner}, nil, false},
		{"the same role again", team(false), ChangeRole{by("o1"), "a", RoleAdmin}, nil, true},
		{"not a member", team(false), ChangeRole{by("o1"), "x", RoleAdmin}, domain.ErrNotFound, false},
		{"no such role", team(false), ChangeRole{by("o1"), "m", "king"}, domain.ErrInvalid, false},
		{"no workspace", State{}, ChangeRole{operator, "m", RoleAdmin}, domain.ErrNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.s.Members)
			evs, err := DecideChangeRole(tc.s, tc.c, now)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !maps.Equal(before, tc.s.Members) {
				t.Fatal("the decision changed the state it was given")
			}
			if err != nil || tc.unchanged {
				if len(evs) != 0 {
					t.Fatalf("events %v", evs)
				}
				return
			}
			after := tc.s
			for _, e := range evs {
				after = after.Evolve(e)
			}
			if after.Members[tc.c.UserID] != tc.c.Role || after.Owners() == 0 {
				t.Fatalf("after: %v", after.Members)
			}
			if ev := evs[0].(MemberRoleChanged); ev.From != tc.s.Members[tc.c.UserID] || ev.By != tc.c.Actor.By {
				t.Fatalf("event %+v", ev)
			}
		})
	}
}

func TestRemoveMember(t *testing.T) {
	by := func(u string) Actor { return Actor{By: u} }
	for _, tc := range []struct {
		name string
		s    State
		c    RemoveMember
		err  error
	}{
		{"an owner removes a member", team(false), RemoveMember{by("o1"), "m"}, nil},
		{"an admin removes an admin", team(false), RemoveMember{by("a"), "a"}, nil},
		{"an admin cannot remove the owner", team(false), RemoveMember{by("a"), "o1"}, domain.ErrForbidden},
		{"an admin cannot remove one of two owners", team(true), RemoveMember{by("a"), "o2"}, domain.ErrForbidden},
		{"a member removes no one", team(false), RemoveMember{by("m"), "a"}, domain.ErrForbidden},
		{"the last owner cannot leave", team(false), RemoveMember{by("o1"), "o1"}, ErrLastOwner},
		{"the operator cannot remove the last owner", team(false), RemoveMember{Actor{Operator: true}, "o1"}, ErrLastOwner},
		{"an owner removes another owner", team(true), RemoveMember{by("o1"), "o2"}, nil},
		{"not a member", team(false), RemoveMember{by("o1"), "x"}, domain.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := DecideRemoveMember(tc.s, tc.c, now)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			after := tc.s.Evolve(evs[0])
			if _, still := after.Members[tc.c.UserID]; still || after.Owners() == 0 || tc.s.Members[tc.c.UserID] == "" {
				t.Fatalf("after: %v (before %v)", after.Members, tc.s.Members)
			}
		})
	}
}
