package executor

import (
	"sort"
	"time"
)

// workerSeenFor is how long a worker that stopped polling is still listed.
const workerSeenFor = time.Minute

type workerKey struct{ workspace, worker string }

// workerSeen is what this process saw of a worker's polls.
type workerSeen struct {
	modules  []string
	lastPoll time.Time
}

// WorkerInfo is a worker as the console lists it.
type WorkerInfo struct {
	WorkerID string    `json:"workerId"`
	Modules  []string  `json:"modules"`
	InFlight int       `json:"tasksInFlight"`
	LastPoll time.Time `json:"lastPoll"`
}

// sawWorker records a poll of p's worker.
func (e *Executor) sawWorker(p TaskPoll, _ int) {
	now := e.opts.Now()
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	b.workers[workerKey{p.WorkspaceID, p.WorkerID}] = &workerSeen{modules: p.Modules, lastPoll: now}
	for k, w := range b.workers { // few workers: forgetting the silent ones as polls come is enough
		if now.Sub(w.lastPoll) > workerSeenFor {
			delete(b.workers, k)
		}
	}
}

// Workers lists the workers that polled this process for workspaceID's tasks in the last
// minute, with the tasks each holds as far as this process knows (its board follows every
// instance's leases through the log), most recent poll first. The record is this process's:
// a worker polling another instance shows there (the console asks the instance it is served
// by).
func (e *Executor) Workers(workspaceID string) []WorkerInfo {
	now := e.opts.Now()
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	held := map[string]int{}
	for _, t := range b.tasks {
		if t.workspace == workspaceID && t.phase == phaseLeased {
			held[t.worker]++
		}
	}
	var out []WorkerInfo
	for k, w := range b.workers {
		if k.workspace != workspaceID || now.Sub(w.lastPoll) > workerSeenFor {
			continue
		}
		out = append(out, WorkerInfo{WorkerID: k.worker, Modules: w.modules, InFlight: held[k.worker], LastPoll: w.lastPoll})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastPoll.After(out[j].LastPoll) })
	return out
}
