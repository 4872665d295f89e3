package workspace

import (
	"errors"
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
	if evs, _ := DecideAddMember(s, "u2", RoleMember, now); len(evs) != 0 {
		t.Fatal("unchanged role appended an event")
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
