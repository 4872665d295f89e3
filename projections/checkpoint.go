package projections

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/eventstore"
)

// Checkpoint is how far a projector has applied the log.
type Checkpoint struct {
	Name          string
	Position      eventstore.Position
	EventsApplied int64
	LastEventAt   *time.Time
	UpdatedAt     time.Time
	Error         string
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// lockCheckpointSQL reads and locks the checkpoint named $1.
const lockCheckpointSQL = `SELECT commit_pos, prepare_pos FROM projection_checkpoints WHERE name = $1 FOR UPDATE`

// lockCheckpoint locks the projector's checkpoint row for the rest of tx and returns it. Every
// write to a projector's tables happens under this lock, which is what lets a rebuild swap
// tables without a live instance writing into the old ones at the same time.
func lockCheckpoint(ctx context.Context, tx pgx.Tx, name string) (eventstore.Position, error) {
	var c, p int64
	err := tx.QueryRow(ctx, lockCheckpointSQL, name).Scan(&c, &p)
	if err == pgx.ErrNoRows {
		if _, err := tx.Exec(ctx, `INSERT INTO projection_checkpoints (name) VALUES ($1) ON CONFLICT DO NOTHING`, name); err != nil {
			return eventstore.Position{}, fmt.Errorf("create checkpoint %s: %w", name, err)
		}
		return lockCheckpoint(ctx, tx, name)
	}
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("lock checkpoint %s: %w", name, err)
	}
	return eventstore.Position{Commit: uint64(c), Prepare: uint64(p)}, nil
}

// saveCheckpointSQL moves a checkpoint ($1) to the position ($2, $3) of the last event of a
// batch of $4 events, created at $5.
const saveCheckpointSQL = `UPDATE projection_checkpoints
	SET commit_pos = $2, prepare_pos = $3, events_applied = events_applied + $4,
	    last_event_at = $5, updated_at = now(), error = NULL
	WHERE name = $1`

func readCheckpoint(ctx context.Context, q querier, name string) (Checkpoint, error) {
	cp := Checkpoint{Name: name}
	var c, p int64
	var errText *string
	err := q.QueryRow(ctx, `SELECT commit_pos, prepare_pos, events_applied, last_event_at, updated_at, error
		FROM projection_checkpoints WHERE name = $1`, name).Scan(&c, &p, &cp.EventsApplied, &cp.LastEventAt, &cp.UpdatedAt, &errText)
	if err == pgx.ErrNoRows {
		return cp, nil
	}
	if err != nil {
		return cp, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	cp.Position = eventstore.Position{Commit: uint64(c), Prepare: uint64(p)}
	if errText != nil {
		cp.Error = *errText
	}
	return cp, nil
}

// lockKey maps a name to a Postgres advisory lock key.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("switchyard:" + name))
	return int64(h.Sum64())
}
