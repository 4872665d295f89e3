package projections_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/testenv"
)

// TestRebuildCatchesUpWithEventsAppendedDuringIt appends an event after the rebuild's replay
// and before its swap, so that the swap has to catch up inside its transaction. That catch-up
// used to leave the transaction's search_path on the shadow schema, so that the swap took the
// shadow schema for the live one, dropped the fresh table and failed with
// `swap in ...: relation "rebuild_....": does not exist` (issue 14.15, seen under load when an
// append landed in that window).
func TestRebuildCatchesUpWithEventsAppendedDuringIt(t *testing.T) {
	e := newEnv(t)
	eng, _ := e.startEngine(t)
	ids := e.seed(t, rand.New(rand.NewPCG(3, 4)), 2, 40)
	e.caughtUp(t, eng)
	appended := false
	err := eng.Rebuild(context.Background(), "billing", func(p projections.RebuildProgress) {
		if p.Done || appended {
			return
		}
		appended = true
		if _, err := e.cmds.Billing.TopUp(context.Background(), ids[0], billing.FromWhole(3), "during-rebuild"); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatalf("rebuild with an event appended before the swap: %v", err)
	}
	if !appended {
		t.Fatal("the rebuild reported no progress before its swap")
	}
	e.caughtUp(t, eng)
	rebuilt := testenv.ReadModel(t, e.pool)
	// The same tables built by the live projector from scratch are the reference.
	if err := eng.Rebuild(context.Background(), "billing", nil); err != nil {
		t.Fatal(err)
	}
	if again := testenv.ReadModel(t, e.pool); !reflect.DeepEqual(rebuilt, again) {
		t.Fatal("the tables swapped in during the append differ from a quiet rebuild")
	}
	var n int
	e.pool.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'rebuild_%'`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d shadow schemas left behind", n)
	}
	rep, err := projections.AuditBilling(context.Background(), e.store, e.q, ids[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.Behind {
		t.Fatalf("audit after the rebuild: %v (behind %v)", rep.Differences, rep.Behind)
	}
}

// TestConcurrentRebuildsOfOneProjector runs two rebuilds of one projector at once: they share
// the shadow schema, so they must take turns rather than drop it under each other.
func TestConcurrentRebuildsOfOneProjector(t *testing.T) {
	e := newEnv(t)
	eng, _ := e.startEngine(t)
	e.seed(t, rand.New(rand.NewPCG(5, 6)), 2, 200)
	e.caughtUp(t, eng)
	before := testenv.ReadModel(t, e.pool)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- eng.Rebuild(context.Background(), "billing", nil) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent rebuild: %v", err)
		}
	}
	if after := testenv.ReadModel(t, e.pool); !reflect.DeepEqual(before, after) {
		t.Fatal("tables differ after two concurrent rebuilds")
	}
}
