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

// Bounds of the record of workers: it is kept in memory and listed on a page, and a workspace
// chooses its worker ids, so neither may grow with them.
const (
	// maxWorkersSeen is how many workers of one workspace are recorded at once; the polls of
	// more still lease tasks, they are only not listed.
	maxWorkersSeen = 1000
	// maxWorkersListed is how many Workers returns, the most recent polls first.
	maxWorkersListed = 200
	// workerPruneEvery is how often the record forgets silent workers (not on every poll).
	workerPruneEvery = 5 * time.Second
)

// sawWorker records a poll of p's worker.
func (e *Executor) sawWorker(p TaskPoll, _ int) {
	now := e.opts.Now()
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.prunedAt) >= workerPruneEvery {
		b.prunedAt = now
		for k, w := range b.workers {
			if now.Sub(w.lastPoll) > workerSeenFor {
				delete(b.workers, k)
				b.workersOf[k.workspace]--
			}
		}
	}
	k := workerKey{p.WorkspaceID, p.WorkerID}
	if w, ok := b.workers[k]; ok {
		w.modules, w.lastPoll = p.Modules, now
		return
	}
	if b.workersOf[p.WorkspaceID] >= maxWorkersSeen {
		return
	}
	b.workers[k] = &workerSeen{modules: p.Modules, lastPoll: now}
	b.workersOf[p.WorkspaceID]++
}

// Workers lists the workers (at most maxWorkersListed) that polled this process for
// workspaceID's tasks in the last minute, with the tasks each holds as far as this process knows (its board follows every
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
	if len(out) > maxWorkersListed {
		out = out[:maxWorkersListed]
	}
	return out
}
