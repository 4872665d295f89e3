// Package user is the user aggregate: registration of a person who signs in to Switchyard.
package user

import (
	"net/mail"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of users: user-<id>.
const Category = "user"

// EmailCategory streams reserve an email address for one user, which makes emails unique
// without a read-model check that could race: useremail-<key>.
const EmailCategory = "useremail"

// Registered records a new user. PasswordHash is an argon2id PHC string, never the password.
type Registered struct {
	UserID       string    `json:"userId"`
	Email        string    `json:"email"`
	Name         string    `json:"name"`
	PasswordHash string    `json:"passwordHash"`
	Staff        bool      `json:"staff"`
	At           time.Time `json:"at"`
}

// EventType names the event in the log.
func (Registered) EventType() string { return "UserRegistered" }

// EmailReserved claims an email address for a user.
type EmailReserved struct {
	Email  string    `json:"email"`
	UserID string    `json:"userId"`
	At     time.Time `json:"at"`
}

// EventType names the event in the log.
func (EmailReserved) EventType() string { return "UserEmailReserved" }

func init() { domain.Events.Register(Registered{}, EmailReserved{}) }

// State is a user folded from its stream.
type State struct {
	Exists       bool
	ID           string
	Email        string
	Name         string
	PasswordHash string
	Staff        bool
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	if r, ok := e.(Registered); ok {
		return State{Exists: true, ID: r.UserID, Email: r.Email, Name: r.Name, PasswordHash: r.PasswordHash, Staff: r.Staff}
	}
	return s
}

// Register is the command to create a user.
type Register struct {
	UserID       string
	Email        string
	Name         string
	PasswordHash string
	Staff        bool
}

// NormalizeEmail lowercases and trims an address so lookups and uniqueness ignore case.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// ValidateEmail checks an address is a plain addr-spec.
func ValidateEmail(email string) error {
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" {
		return domain.Invalid("email", "must be a valid email address")
	}
	return nil
}

// ValidatePassword enforces the minimum a sign-in password must have.
func ValidatePassword(password string) error {
	if len(password) < 8 {
		return domain.Invalid("password", "must be at least 8 characters")
	}
	if len(password) > 1024 {
		return domain.Invalid("password", "must be at most 1024 characters")
	}
	return nil
}

// DecideRegister registers the user once; registering an existing id is a conflict.
func DecideRegister(s State, c Register, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	email := NormalizeEmail(c.Email)
	if err := ValidateEmail(email); err != nil {
		return nil, err
	}
	if len(c.Name) > 200 {
		return nil, domain.Invalid("name", "must be at most 200 characters")
	}
	if c.PasswordHash == "" {
		return nil, domain.Invalid("password", "is required")
	}
	return []domain.Event{Registered{UserID: c.UserID, Email: email, Name: strings.TrimSpace(c.Name), PasswordHash: c.PasswordHash, Staff: c.Staff, At: now.UTC()}}, nil
}

// Reservation is the state of an email reservation stream.
type Reservation struct {
	Taken  bool
	UserID string
}

// Evolve applies one event.
func (r Reservation) Evolve(e domain.Event) Reservation {
	if ev, ok := e.(EmailReserved); ok {
		return Reservation{Taken: true, UserID: ev.UserID}
	}
	return r
}

// DecideReserve claims the address for userID; a reservation held by this same user is kept
// (a retried registration), one held by another user is ErrAlreadyExists.
func DecideReserve(r Reservation, email, userID string, now time.Time) ([]domain.Event, error) {
	if r.Taken {
		if r.UserID == userID {
			return nil, nil
		}
		return nil, domain.ErrAlreadyExists
	}
	return []domain.Event{EmailReserved{Email: email, UserID: userID, At: now.UTC()}}, nil
}
