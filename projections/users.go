package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/user"
	"github.com/switchyard/switchyard/eventstore"
)

// Users projects users.
type Users struct{}

// Name implements Projector.
func (Users) Name() string { return "users" }

// Tables implements Projector.
func (Users) Tables() []string { return []string{"users"} }

// Filter implements Projector.
func (Users) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(user.Registered{})}
}

// Migrate implements Projector.
func (Users) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS users (
		id            text PRIMARY KEY,
		email         text NOT NULL UNIQUE,
		name          text NOT NULL,
		password_hash text NOT NULL,
		staff         boolean NOT NULL,
		created_at    timestamptz NOT NULL
	)`)
	return err
}

// Apply implements Projector.
func (Users) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	if r, ok := e.(user.Registered); ok {
		tx.Exec(`INSERT INTO users (id, email, name, password_hash, staff, created_at) VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT (id) DO NOTHING`, r.UserID, r.Email, r.Name, r.PasswordHash, r.Staff, r.At)
	}
	return nil
}

// UserRow is a user as the read model holds it.
type UserRow struct {
	ID           string    `json:"id"`
	Email        string    `json:"email"`
	Name         string    `json:"name"`
	PasswordHash string    `json:"-"`
	Staff        bool      `json:"staff"`
	CreatedAt    time.Time `json:"createdAt"`
}

// Queries reads the read models.
type Queries struct{ db querierPool }

type querierPool interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// NewQueries returns queries over db (a pool or a transaction).
func NewQueries(db querierPool) *Queries { return &Queries{db: db} }

// UserByEmail finds a user by email.
func (q *Queries) UserByEmail(ctx context.Context, email string) (UserRow, error) {
	return q.user(ctx, `WHERE email = $1`, user.NormalizeEmail(email))
}

// UserByID finds a user by id.
func (q *Queries) UserByID(ctx context.Context, id string) (UserRow, error) {
	return q.user(ctx, `WHERE id = $1`, id)
}

func (q *Queries) user(ctx context.Context, where string, arg any) (UserRow, error) {
	var u UserRow
	err := q.db.QueryRow(ctx, `SELECT id, email, name, password_hash, staff, created_at FROM users `+where, arg).
		Scan(&u.ID, &u.Email, &u.Name, &u.PasswordHash, &u.Staff, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return u, fmt.Errorf("user: %w", domain.ErrNotFound)
	}
	return u, err
}
