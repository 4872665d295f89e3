package scheduler

import (
	"container/heap"
	"context"
	"time"
)

// Durable waits. A WAIT stage's due time (a time wait's end, a signal or approval wait's
// timeout) is in its StageWaiting event and in the run_waits read model. The lead loads only
// the waits due within WaitHorizon, at most WaitBatch of them, into a heap and arms one timer
// for the soonest; when it fires, each due run is stepped, and the step (run.Step) ends every
// wait whose time has come. So memory holds what is due soon, however many runs wait; a wait
// due while no instance led is found by the first load of the next lead; and a wait stepped by
// two instances is ended once, by the run stream's expected revision.

// dueWait is an armed wait: its run and when it is due.
type dueWait struct {
	runID string
	at    time.Time
}

type waitHeap []dueWait

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(dueWait)) }
func (h *waitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// armWait adds a run's wait due at at to the heap, unless it is armed already, due beyond the
// horizon (a later load finds it) or the heap is full.
func (s *Scheduler) armWait(runID string, at time.Time) {
	if at.IsZero() || at.After(s.opts.Now().Add(s.opts.WaitHorizon)) {
		return
	}
	key := dueWait{runID: runID, at: at.UTC()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, fired := s.fired[key]; fired || s.armed[key] || len(s.waitQueue) >= s.opts.WaitBatch {
		return
	}
	s.armed[key] = true
	heap.Push(&s.waitQueue, key)
	if s.waitQueue[0] == key {
		select {
		case s.rearm <- struct{}{}:
		default:
		}
	}
}

// watchWaits runs beside the lead's feed: it loads the waits due soon every WaitPoll and steps
// their runs when they are due.
func (s *Scheduler) watchWaits(ctx context.Context) {
	poll := time.NewTicker(s.opts.WaitPoll)
	defer poll.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer func() {
		s.mu.Lock()
		s.waitQueue, s.armed, s.fired = nil, map[dueWait]bool{}, map[dueWait]time.Time{}
		s.mu.Unlock()
	}()
	s.loadWaits(ctx)
	for {
		s.fireDue(ctx)
		timer.Reset(s.untilNextWait())
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			s.loadWaits(ctx)
		case <-timer.C:
		case <-s.rearm:
		}
	}
}

// loadWaits arms the waits the read model holds due within the horizon.
func (s *Scheduler) loadWaits(ctx context.Context) {
	due, err := s.queries.DueWaits(ctx, s.opts.Now().Add(s.opts.WaitHorizon), s.opts.WaitBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WithError(err).Warn("cannot load due waits; the next poll retries")
		}
		return
	}
	s.forgetFired()
	for _, w := range due {
		s.armWait(w.RunID, w.DueAt)
	}
}

// untilNextWait is how long until the soonest armed wait; the poll interval when none is.
func (s *Scheduler) untilNextWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waitQueue) == 0 {
		return s.opts.WaitPoll
	}
	return max(s.waitQueue[0].at.Sub(s.opts.Now()), 0)
}

// fireDue steps the runs of every armed wait now due. A step that fails leaves the wait in
// the read model, and the next load arms it again.
func (s *Scheduler) fireDue(ctx context.Context) {
	now := s.opts.Now()
	var runs []string
	s.mu.Lock()
	for len(s.waitQueue) > 0 && !s.waitQueue[0].at.After(now) {
		w := heap.Pop(&s.waitQueue).(dueWait)
		delete(s.armed, w)
		s.fired[w] = now
		runs = append(runs, w.runID)
	}
	s.mu.Unlock()
	for _, id := range runs {
		s.enqueue(ctx, id)
	}
}

// forgetFired drops the waits fired more than a horizon ago: a wait still in the read model
// by then was not ended by its step (which failed), and the load arms it again. Until then it
// is left alone, as the read model catches up with the step that ended it.
func (s *Scheduler) forgetFired() {
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := s.opts.Now().Add(-s.opts.WaitHorizon)
	for w, at := range s.fired {
		if at.Before(cut) {
			delete(s.fired, w)
		}
	}
}

// ArmedWaits is how many waits this instance holds in memory (due within the horizon).
func (s *Scheduler) ArmedWaits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waitQueue)
}
