// Package session is the sign-in session aggregate: a user signed in to the service's own pages
// or dashboard. The session cookie and the dashboard's session JWT name the session, so signing
// out ends it everywhere at once rather than at the token's expiry.
package session

import (
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of sessions: session-<id>.
const Category = "session"

// Started records a sign-in.
type Started struct {
	ID        string    `json:"id"`
	UserID    string    `json:"userId"`
	ExpiresAt time.Time `json:"expiresAt"`
	At        time.Time `json:"at"`
}

// Ended records a sign-out.
type Ended struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// EventType names the events in the log.
func (Started) EventType() string { return "SessionStarted" }
func (Ended) EventType() string   { return "SessionEnded" }

func init() { domain.Events.Register(Started{}, Ended{}) }

// State is a session folded from its stream.
type State struct {
	Exists    bool
	ID        string
	UserID    string
	StartedAt time.Time
	ExpiresAt time.Time
	Ended     bool
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Started:
		return State{Exists: true, ID: ev.ID, UserID: ev.UserID, StartedAt: ev.At, ExpiresAt: ev.ExpiresAt}
	case Ended:
		s.Ended = true
	}
	return s
}

// Active reports whether the session is signed in at now.
func (s State) Active(now time.Time) bool { return s.Exists && !s.Ended && now.Before(s.ExpiresAt) }

// DecideStart records the sign-in once.
func DecideStart(s State, id, userID string, ttl time.Duration, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if userID == "" || ttl <= 0 {
		return nil, domain.Invalid("session", "user and lifetime are required")
	}
	now = now.UTC()
	return []domain.Event{Started{ID: id, UserID: userID, ExpiresAt: now.Add(ttl), At: now}}, nil
}

// DecideEnd signs the session out; ending it again changes nothing.
func DecideEnd(s State, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	if s.Ended {
		return nil, nil
	}
	return []domain.Event{Ended{ID: s.ID, At: now.UTC()}}, nil
}
