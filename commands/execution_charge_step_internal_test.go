package commands

import (
	"testing"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

// A chain's commit caches each run it stepped once, as the commit leaves it and at the commit's
// revision: never an earlier step's state at that revision.
func TestAChainsCommitCachesOnlyTheRunAsItLeavesIt(t *testing.T) {
	at := func(st run.Status) loaded[run.State] {
		return loaded[run.State]{state: run.State{Exists: true, Status: st}}
	}
	plan := chargePlan{
		parts: []eventstore.StreamAppend{{Stream: "billing-w"}, {Stream: "run-a"}, {Stream: "execution-x"}, {Stream: "run-b"}},
		steps: []plannedStep{
			{part: 1, after: at(run.StatusExecuting)},
			{part: 3, after: at(run.StatusExecuting)},
			{part: 1, after: at(run.StatusExecuting)},
			{part: 1, after: at(run.StatusCompleted)},
		},
	}
	res := []eventstore.AppendResult{{NextRevision: 3}, {NextRevision: 9}, {NextRevision: 1}, {NextRevision: 4}}
	got := runsAfter(plan, res)
	if len(got) != 2 {
		t.Fatalf("%d runs to cache, want 2", len(got))
	}
	if a := got["run-a"]; a.state.Status != run.StatusCompleted || a.revision != 9 || !a.exists {
		t.Fatalf("run-a cached %s at %d (exists %v), want COMPLETED at 9", a.state.Status, a.revision, a.exists)
	}
	if b := got["run-b"]; b.state.Status != run.StatusExecuting || b.revision != 4 {
		t.Fatalf("run-b cached %s at %d, want EXECUTING at 4", b.state.Status, b.revision)
	}
}
