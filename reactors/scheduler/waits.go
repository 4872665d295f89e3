package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Durable waits. A WAIT stage's due time (a time wait's end, a signal or approval wait's
// timeout) is in its StageWaiting event and in the run_waits read model. The lead loads only
// the waits due within WaitHorizon, at most WaitBatch of them, into a heap and arms one timer
// for the soonest, and has their runs read ahead meanwhile (Waits.PrefetchDue); when it fires,
// the due runs are stepped all together on what was read (Waits.FireDue), and each step
// (run.Step) ends every wait whose time has come: ten thousand due in one second end within
// it (docs/performance.md). So memory holds what is due soon, however many runs wait; a wait
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
// horizon (a later load finds it) or the heap is full. It reports whether the wait is armed
// (now or before) and not fired yet.
func (s *Scheduler) armWait(runID string, at time.Time) bool {
	if at.IsZero() || at.After(s.opts.Now().Add(s.opts.WaitHorizon)) {
		return false
	}
	key := dueWait{runID: runID, at: at.UTC()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.armed[key] {
		return true
	}
	if _, fired := s.fired[key]; fired || len(s.waitQueue) >= s.opts.WaitBatch {
		return false
	}
	s.armed[key] = true
	heap.Push(&s.waitQueue, key)
	if s.waitQueue[0] == key {
		select {
		case s.rearm <- struct{}{}:
		default:
		}
	}
	return true
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
	var armed []string
	for _, w := range due {
		if s.armWait(w.RunID, w.DueAt) {
			armed = append(armed, w.RunID)
		}
	}
	// Read their runs now, so that firing them is a decision and an append each (FireDue).
	// One read-ahead at a time: the next load hands a slow one's leftovers to the next.
	if len(armed) > 0 && s.prefetching.CompareAndSwap(false, true) {
		s.background(ctx, func() {
			defer s.prefetching.Store(false)
			s.cmds.Waits.PrefetchDue(ctx, armed)
		})
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

// fireDue steps the runs of every armed wait now due, all together (fire). A step that fails
// leaves the wait in the read model, and the next load arms it again.
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
	if len(runs) > 0 {
		s.background(ctx, func() { s.fire(ctx, runs) })
	}
}

// fire steps runs whose waits are due, all at once (Waits.FireDue), instead of Concurrency
// at a time with a read each: that is what keeps waits due together on time. A run a step is
// under way for, or that FireDue leaves, is stepped as any other (enqueue); one fired here is
// busy meanwhile, so no worker steps it beside, and what was queued for it meanwhile is
// stepped after (release).
func (s *Scheduler) fire(ctx context.Context, runIDs []string) {
	mine := make([]string, 0, len(runIDs))
	var others []string
	s.mu.Lock()
	for _, id := range runIDs {
		if s.busy[id] {
			others = append(others, id)
			continue
		}
		s.busy[id] = true
		mine = append(mine, id)
	}
	s.mu.Unlock()
	for _, id := range others {
		s.enqueue(ctx, id)
	}
	var wg sync.WaitGroup
	for _, f := range s.cmds.Waits.FireDue(ctx, mine) {
		if f.Err != nil {
			s.release(ctx, f.RunID, true)
			continue
		}
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			s.release(ctx, f.RunID, false)
			continue
		}
		wg.Go(func() {
			defer func() { <-s.slots }()
			s.stepped(ctx, &f.State, f.Dispatched)
			s.release(ctx, f.RunID, false)
		})
	}
	wg.Wait()
}

// release ends fire's hold on a run, and steps it when again is set or something was queued
// for it meanwhile.
func (s *Scheduler) release(ctx context.Context, runID string, again bool) {
	s.mu.Lock()
	delete(s.busy, runID)
	_, queued := s.queued[runID]
	s.mu.Unlock()
	if (again || queued) && ctx.Err() == nil {
		s.enqueue(ctx, runID)
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
