package projections

import (
	"context"
	"fmt"
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
