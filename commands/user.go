package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/user"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/emailaddr"
	"github.com/switchyard/switchyard/internal/password"
)

var userAgg = aggregate[user.State]{evolve: user.State.Evolve}
var reservationAgg = aggregate[user.Reservation]{evolve: user.Reservation.Evolve}

// RegisterUser is the input of the register-user command.
type RegisterUser struct {
	Email    string
	Password string
	Name     string
	Staff    bool
}

// UserStream is the stream of a user.
func UserStream(id string) string { return eventstore.StreamName(user.Category, id) }

// EmailStream is the reservation stream of an email address in its canonical form
// (emailaddr.Canonical). The address is hashed so stream names carry no personal data.
func EmailStream(email string) string {
	sum := sha256.Sum256([]byte(email))
	return eventstore.StreamName(user.EmailCategory, hex.EncodeToString(sum[:16]))
}

// RegisterUser creates a user with a unique email and returns its id. The email is taken in its
// canonical form, and one that mixes scripts or reads as another is refused (a 400 naming
// email), so a look-alike of an address cannot become a second account. The email is reserved
// first; a registration that crashed between the two appends is completed by a retry, which
// finds the reservation pointing at a user that does not exist yet.
func (h *Identity) RegisterUser(ctx context.Context, c RegisterUser) (string, error) {
	email, err := emailaddr.Canonical(c.Email)
	if err != nil {
		return "", err
	}
	if err := user.ValidatePassword(c.Password); err != nil {
		return "", err
	}
	hash, err := password.Hash(c.Password)
	if err != nil {
		return "", err
	}
	if legacy := emailaddr.Legacy(c.Email); legacy != email {
		// An account registered before addresses were made canonical holds this form.
		old, err := load(ctx, h, EmailStream(legacy), reservationAgg)
		if err != nil {
			return "", err
		}
		if old.state.Taken {
			return "", fmt.Errorf("user %s: %w", email, domain.ErrAlreadyExists)
		}
	}
	id := uuid.NewString()
	res, err := load(ctx, h, EmailStream(email), reservationAgg)
	if err != nil {
		return "", err
	}
	if res.state.Taken {
		existing, err := load(ctx, h, UserStream(res.state.UserID), userAgg)
		if err != nil {
			return "", err
		}
		if existing.state.Exists {
			return "", fmt.Errorf("user %s: %w", email, domain.ErrAlreadyExists)
		}
		id = res.state.UserID
	}
	_, err = execute(ctx, h, EmailStream(email), reservationAgg, func(r user.Reservation) ([]domain.Event, error) {
		return user.DecideReserve(r, email, id, h.now())
	})
	if err != nil {
		return "", wrap("reserve email", err)
	}
	_, err = execute(ctx, h, UserStream(id), userAgg, func(s user.State) ([]domain.Event, error) {
		return user.DecideRegister(s, user.Register{UserID: id, Email: email, Name: c.Name, PasswordHash: hash, Staff: c.Staff}, h.now())
	})
	return id, wrap("register user", err)
}

// UserByEmail returns the user registered with email, read from the event store so it is
// consistent even before projections catch up. email is looked up in its canonical form (an
// address RegisterUser would refuse is refused here too, a 400 naming email), then, for an
// account registered before addresses were made canonical, as it was stored then.
func (h *Identity) UserByEmail(ctx context.Context, email string) (user.State, error) {
	canonical, err := emailaddr.Canonical(email)
	if err != nil {
		return user.State{}, err
	}
	for _, key := range slices.Compact([]string{canonical, emailaddr.Legacy(email)}) {
		res, err := load(ctx, h, EmailStream(key), reservationAgg)
		if err != nil {
			return user.State{}, err
		}
		if res.state.Taken {
			return h.User(ctx, res.state.UserID)
		}
	}
	return user.State{}, fmt.Errorf("user %s: %w", canonical, domain.ErrNotFound)
}

// User returns the user with id.
func (h *Identity) User(ctx context.Context, id string) (user.State, error) {
	u, err := load(ctx, h, UserStream(id), userAgg)
	if err != nil {
		return user.State{}, err
	}
	if !u.state.Exists {
		return user.State{}, fmt.Errorf("user %s: %w", id, domain.ErrNotFound)
	}
	return u.state, nil
}

// IsNotFound reports whether err means the subject does not exist.
func IsNotFound(err error) bool { return errors.Is(err, domain.ErrNotFound) }
