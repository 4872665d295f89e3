package postgres

import (
	"math"
	"slices"
	"testing"

	"github.com/switchyard/switchyard/eventstore"
)

// TestPlanBatches: which appends share a batched statement and which keep their own.
func TestPlanBatches(t *testing.T) {
	part := func(stream string, expected eventstore.ExpectedRevision, events int) encoded {
		return encoded{stream: stream, expected: expected, ids: make([][16]byte, events)}
	}
	parts := []encoded{
		0: part("c-2", eventstore.NoStream(), 1),
		1: part("c-1", eventstore.NoStream(), 3),
		2: part("u-2", eventstore.Exact(4), 1),
		3: part("u-1", eventstore.StreamExists(), 2),
		4: part("dup", eventstore.Exact(0), 1),              // a stream twice: own statements, in order
		5: part("any", eventstore.Any(), 1),                 // Any: own statement
		6: part("dup", eventstore.Exact(1), 1),              //
		7: part("big", eventstore.Exact(math.MaxUint64), 1), // beyond int64: own statement
		8: part("none", eventstore.NoStream(), 0),           // no events: own statement
	}
	p := planBatches(parts)
	if want := []int{1, 0}; !slices.Equal(p.create, want) {
		t.Errorf("create = %v, want %v (by stream name)", p.create, want)
	}
	if want := []int{3, 2}; !slices.Equal(p.update, want) {
		t.Errorf("update = %v, want %v (by stream name)", p.update, want)
	}
	if want := []int{5, 7, 4, 6, 8}; !slices.Equal(p.rest, want) {
		t.Errorf("rest = %v, want %v (by stream name, one stream's appends in order)", p.rest, want)
	}
	// A lone append of a kind keeps its own statement, whose plan is simpler.
	lone := planBatches([]encoded{part("c", eventstore.NoStream(), 1), part("u", eventstore.Exact(0), 1)})
	if len(lone.create)+len(lone.update) != 0 || !slices.Equal(lone.rest, []int{0, 1}) {
		t.Errorf("lone appends: %+v, want both on their own", lone)
	}
}
