package projections_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/testenv"
)

// TestActiveSeesTheProjectorsLock: Active is true while some engine runs the projector (holds
// its lock), as seen from another engine on the same database, and false once none does.
func TestActiveSeesTheProjectorsLock(t *testing.T) {
	e := testenv.New(t)
	other, err := projections.NewEngine(e.Pool, e.Store, projections.All(), projections.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testenv.Eventually(t, time.Minute, "the running engine holds the billing projector's lock", func() bool {
		active, err := other.Active(ctx, "billing")
		return err == nil && active
	})
	if active, err := other.Active(ctx, "no-such-projector"); err != nil || active {
		t.Fatalf("Active of a projector nobody runs = %v, %v", active, err)
	}
}
