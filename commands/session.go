package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/session"
	"github.com/switchyard/switchyard/eventstore"
)

var sessionAgg = aggregate[session.State]{evolve: session.State.Evolve}

// SessionStream is the stream of a sign-in session.
func SessionStream(id string) string { return eventstore.StreamName(session.Category, id) }

// StartSession records a sign-in of userID lasting ttl and returns the session.
func (h *Identity) StartSession(ctx context.Context, userID string, ttl time.Duration) (session.State, error) {
	id := uuid.NewString()
	var st session.State
	_, err := execute(ctx, h, SessionStream(id), sessionAgg, func(s session.State) ([]domain.Event, error) {
		evs, err := session.DecideStart(s, id, userID, ttl, h.now())
		if err == nil {
			st = s.Evolve(evs[0])
		}
		return evs, err
	})
	return st, wrap("start session", err)
}

// EndSession signs a session out.
func (h *Identity) EndSession(ctx context.Context, id string) error {
	id, err := canonicalID("session", id)
	if err != nil {
		return err
	}
	_, err = execute(ctx, h, SessionStream(id), sessionAgg, func(s session.State) ([]domain.Event, error) {
		return session.DecideEnd(s, h.now())
	})
	return wrap("end session", err)
}

// Session folds the session with id from the event store.
func (h *Identity) Session(ctx context.Context, id string) (session.State, error) {
	id, err := canonicalID("session", id)
	if err != nil {
		return session.State{}, err
	}
	s, err := load(ctx, h, SessionStream(id), sessionAgg)
	if err != nil {
		return session.State{}, err
	}
	if !s.state.Exists {
		return session.State{}, fmt.Errorf("session %s: %w", id, domain.ErrNotFound)
	}
	return s.state, nil
}
