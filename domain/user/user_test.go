package user

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestDecideRegister(t *testing.T) {
	ok := Register{UserID: "u1", Email: " Ada@Example.com ", Name: "Ada", PasswordHash: "$argon2id$x"}
	evs, err := DecideRegister(State{}, ok, now)
	if err != nil {
		t.Fatal(err)
	}
	r := evs[0].(Registered)
	if r.Email != "ada@example.com" || r.UserID != "u1" || !r.At.Equal(now) {
		t.Fatalf("registered %+v", r)
	}
	s := State{}.Evolve(r)
	if _, err := DecideRegister(s, ok, now); !errors.Is(err, domain.ErrAlreadyExists) {
		t.Fatalf("second register: %v", err)
	}
	for name, c := range map[string]Register{
		"bad email":   {UserID: "u", Email: "not-an-email", PasswordHash: "h"},
		"named email": {UserID: "u", Email: "Ada <ada@example.com>", PasswordHash: "h"},
		"no hash":     {UserID: "u", Email: "a@b.co"},
	} {
		var ve *domain.ValidationError
		if _, err := DecideRegister(State{}, c, now); !errors.As(err, &ve) {
			t.Fatalf("%s: %v, want a validation error", name, err)
		}
	}
}

func TestDecideReserve(t *testing.T) {
	evs, err := DecideReserve(Reservation{}, "a@b.co", "u1", now)
	if err != nil || len(evs) != 1 {
		t.Fatalf("reserve: %v %v", evs, err)
	}
	r := Reservation{}.Evolve(evs[0])
	if evs, err := DecideReserve(r, "a@b.co", "u1", now); err != nil || len(evs) != 0 {
		t.Fatalf("same user again: %v %v", evs, err)
	}
	if _, err := DecideReserve(r, "a@b.co", "u2", now); !errors.Is(err, domain.ErrAlreadyExists) {
		t.Fatalf("other user: %v", err)
	}
}

func TestValidatePassword(t *testing.T) {
	if err := ValidatePassword("short"); err == nil {
		t.Fatal("short password accepted")
	}
	if err := ValidatePassword("long enough"); err != nil {
		t.Fatal(err)
	}
}
