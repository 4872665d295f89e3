package executor

import (
	"fmt"
	"testing"
	"time"
)

// A workspace choosing ever new worker ids fills its own share of the record, not another
// workspace's, and the page of workers stays bounded; silent workers are forgotten.
func TestWorkerRecordIsBoundedPerWorkspace(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	e := &Executor{tasks: newTaskBoard(), opts: Config{Now: func() time.Time { return now }}}
	for i := range maxWorkersSeen + 500 {
		e.sawWorker(TaskPoll{WorkspaceID: "noisy", WorkerID: fmt.Sprint("w-", i), Modules: []string{"acme.x"}}, 0)
	}
	e.sawWorker(TaskPoll{WorkspaceID: "quiet", WorkerID: "host-1", Modules: []string{"acme.y"}}, 0)
	if n := len(e.tasks.workers); n != maxWorkersSeen+1 {
		t.Fatalf("%d workers recorded, want %d", n, maxWorkersSeen+1)
	}
	if got := e.Workers("noisy"); len(got) != maxWorkersListed {
		t.Fatalf("%d workers listed, want %d", len(got), maxWorkersListed)
	}
	if got := e.Workers("quiet"); len(got) != 1 || got[0].WorkerID != "host-1" {
		t.Fatalf("the quiet workspace's workers: %+v", got)
	}
	now = now.Add(workerSeenFor + workerPruneEvery)
	e.sawWorker(TaskPoll{WorkspaceID: "noisy", WorkerID: "fresh"}, 0)
	if n := len(e.tasks.workers); n != 1 || e.tasks.workersOf["noisy"] != 1 {
		t.Fatalf("after a silent minute: %d recorded, %d of noisy", n, e.tasks.workersOf["noisy"])
	}
}
