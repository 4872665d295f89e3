// Package projections builds the Postgres read models from the event log: the Watermill router
// and subscriber, per-projector checkpoints, rebuilds, the projectors and their queries.
package projections

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/eventstore"
)

// ErrDecode marks an event a projector handles but cannot decode. The projector stops on it and
// readiness turns red: skipping it would silently corrupt the read model.
var ErrDecode = errors.New("cannot decode event")

// Projector turns events into rows of the tables it owns. Apply runs inside the transaction that
// also advances the projector's checkpoint. Table names are unqualified: the framework sets
// search_path so that the same code writes the live tables or a rebuild's fresh copies.
type Projector interface {
	// Name is unique and stable: it keys the checkpoint and the advisory lock.
	Name() string
	// Filter selects the events Apply is given.
	Filter() eventstore.Filter
	// Tables lists the tables the projector owns; a rebuild recreates and swaps exactly these.
	Tables() []string
	// Migrate creates the projector's tables (CREATE TABLE IF NOT EXISTS ...) in the current schema.
	Migrate(ctx context.Context, tx pgx.Tx) error
	// Apply applies one event. It must be deterministic: every value it writes comes from the
	// event or earlier rows, never from the clock, so a rebuild reproduces the tables exactly.
	Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error
}
