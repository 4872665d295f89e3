package projections

import (
	"context"
	"fmt"

	"github.com/switchyard/switchyard/eventstore"
)

// Active reports whether some process runs projector name now, that is, holds its advisory
// lock (HoldLock) on this database. A tool that would wait for the projector to catch up asks
// first: with no serve process running, nothing will.
func (e *Engine) Active(ctx context.Context, name string) (bool, error) {
	key := uint64(lockKey("projector:" + name))
	// pg_locks shows a bigint advisory key as two oids: its high and low 32 bits.
	var held bool
	err := e.pool.QueryRow(ctx, `SELECT EXISTS (
		SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = $1::bigint::oid AND objid = $2::bigint::oid)`,
		int64(key>>32), int64(key&0xffffffff)).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("is projector %s running: %w", name, err)
	}
	return held, nil
}

// CatchUp waits until every projector some process runs has applied each event of its filter up
// to head, or ctx ends. serve calls it on shutdown, after the reactors have drained and before
// the engine stops, so that what the drain recorded is in the read model when the process exits.
func (e *Engine) CatchUp(ctx context.Context, head eventstore.Position) error {
	for _, p := range e.order {
		active, err := e.Active(ctx, p.Name())
		if err != nil {
			return err
		}
		if active {
			if err := e.catchUp(ctx, p, head); err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUp waits for p to apply its next pending event until none is left at or before head
// (a projector's checkpoint moves only with the events it reads, so head itself may never be
// reached).
func (e *Engine) catchUp(ctx context.Context, p Projector, head eventstore.Position) error {
	for {
		cp, err := readCheckpoint(ctx, e.pool, p.Name())
		if err != nil {
			return err
		}
		next, err := e.store.ReadAll(ctx, cp.Position, 1, p.Filter())
		if err != nil {
			return fmt.Errorf("next event of %s: %w", p.Name(), err)
		}
		if len(next) == 0 || head.Less(next[0].Position) {
			return nil
		}
		if err := e.WaitFor(ctx, p.Name(), next[0].Position); err != nil {
			return err
		}
	}
}
