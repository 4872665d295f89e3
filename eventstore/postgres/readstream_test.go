package postgres

import (
	"errors"
	"testing"

	"github.com/switchyard/switchyard/eventstore"
)

// A read from the start asks, in the same round trip, whether the stream exists: a stream
// with no events is no error, an unknown one is ErrStreamNotFound, and a stream's events come
// back whole.
func TestReadStreamFromStartTellsEmptyFromUnknown(t *testing.T) {
	pool, _ := newMigratedDB(t, 4)
	s := newStore(t, pool, Config{})
	ctx := testCtx(t)
	if _, err := pool.Exec(ctx, `INSERT INTO streams (name, revision, tx_id) VALUES ('empty-1', -1, pg_current_xact_id())`); err != nil {
		t.Fatal(err)
	}
	if evs, err := s.ReadStream(ctx, "empty-1", 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("a stream with no events: %d events, %v; want none and no error", len(evs), err)
	}
	if _, err := s.ReadStream(ctx, "unknown-1", 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("an unknown stream: %v, want ErrStreamNotFound", err)
	}
	if _, err := s.Append(ctx, "full-1", eventstore.NoStream(), event("A"), event("B")); err != nil {
		t.Fatal(err)
	}
	if evs, err := s.ReadStream(ctx, "full-1", 0, 10); err != nil || len(evs) != 2 || evs[1].Revision != 1 {
		t.Fatalf("a stream of two events: %+v, %v", evs, err)
	}
}
