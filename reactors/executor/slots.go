package executor

import (
	"sync"
	"sync/atomic"
	"time"
)

// slots shares the executor's run slots between workspaces. Work waits in one queue per
// workspace; a freed slot goes to the waiting workspace that holds the fewest slots (among
// equals, the one whose turn came first: round robin), never to one holding perWorkspace. So one workspace's backlog never holds more than its share, and a
// workspace with nothing running finds a free slot at once unless at least
// capacity/perWorkspace other workspaces are each using their full share.
type slots struct {
	capacity     int
	perWorkspace int

	mu      sync.Mutex
	busy    int
	running map[string]int
	queues  map[string][]func()
	turn    []string // workspaces with queued work, in turn order
}

func newSlots(capacity, perWorkspace int) *slots {
	return &slots{capacity: capacity, perWorkspace: max(1, min(perWorkspace, capacity)),
		running: map[string]int{}, queues: map[string][]func(){}}
}

// submit queues job for workspace; it runs in a goroutine of its own once a slot is its.
func (s *slots) submit(workspace string, job func()) {
	s.mu.Lock()
	if len(s.queues[workspace]) == 0 {
		s.turn = append(s.turn, workspace)
	}
	s.queues[workspace] = append(s.queues[workspace], job)
	s.startLocked()
	s.mu.Unlock()
}

// tryStart runs job at once in a slot of workspace and reports true, or reports false when
// no slot is free for it now: the slots are all busy, the workspace holds its share, or work
// of the workspace already waits (which job must not overtake).
func (s *slots) tryStart(workspace string, job func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy >= s.capacity || s.running[workspace] >= s.perWorkspace || len(s.queues[workspace]) > 0 {
		return false
	}
	s.startJobLocked(workspace, job)
	return true
}

// startWithin runs job in a slot of workspace at once if tryStart can, or else queues it and
// reports true once it starts within d. When d passes first it reports false, and job never
// runs: its queued place is given up when reached.
func (s *slots) startWithin(workspace string, job func(), d time.Duration) bool {
	if s.tryStart(workspace, job) {
		return true
	}
	const waiting, started, abandoned = 0, 1, 2
	var state atomic.Int32
	running := make(chan struct{})
	s.submit(workspace, func() {
		if !state.CompareAndSwap(waiting, started) {
			return
		}
		close(running)
		job()
	})
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-running:
		return true
	case <-timer.C:
		if state.CompareAndSwap(waiting, abandoned) {
			return false
		}
		<-running // it started as the time ran out
		return true
	}
}

// startLocked starts queued work while slots are free and some waiting workspace is under
// its share.
func (s *slots) startLocked() {
	for s.busy < s.capacity {
		i := s.nextLocked()
		if i < 0 {
			return
		}
		ws := s.turn[i]
		q := s.queues[ws]
		job := q[0]
		q[0] = nil
		s.turn = append(s.turn[:i], s.turn[i+1:]...)
		if len(q) == 1 {
			delete(s.queues, ws)
		} else {
			s.queues[ws] = q[1:]
			s.turn = append(s.turn, ws) // its next job waits for every other workspace's turn
		}
		s.startJobLocked(ws, job)
	}
}

// startJobLocked runs job in a slot of ws, which the caller knows is free.
func (s *slots) startJobLocked(ws string, job func()) {
	s.busy++
	s.running[ws]++
	go func() {
		defer s.done(ws)
		job()
	}()
}

// nextLocked is the index in turn of the waiting workspace holding the fewest slots, under
// its share, or -1.
func (s *slots) nextLocked() int {
	best := -1
	for i, ws := range s.turn {
		if n := s.running[ws]; n < s.perWorkspace && (best < 0 || n < s.running[s.turn[best]]) {
			best = i
		}
	}
	return best
}

func (s *slots) done(ws string) {
	s.mu.Lock()
	s.busy--
	if s.running[ws]--; s.running[ws] == 0 {
		delete(s.running, ws)
	}
	s.startLocked()
	s.mu.Unlock()
}

// queued is how many jobs wait for a slot.
func (s *slots) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queues {
		n += len(q)
	}
	return n
}
