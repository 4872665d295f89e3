package scheduler

import (
	"context"
	"errors"
	"slices"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
)

// Concurrency queues (docs/workflows.md, "Concurrency per key"). A run of a definition with a
// concurrency joins its key's queue in its trigger's commit and waits CREATED; the lead
// scheduler settles the queue (commands.RunQueues.Settle) when a run of it is triggered and
// when one ends, which admits waiting runs in order while slots are free. Settling is exact
// across instances by itself (an append at the queue's revision); the lead only makes it
// prompt. What a lead missed (a crash between a run's end and its settle, a takeover while
// the read model was behind) is found by settleWaiting, at takeover and every sweep.

// maxWaitingQueues bounds the queues one settleWaiting looks at; the next sweep takes the rest.
const maxWaitingQueues = 500

// settle settles queue id, ended being runs of it that ended, off the feed's loop. Settles of
// one queue run one at a time, the later ones gathered into one: each reads the queue anyway.
func (s *Scheduler) settle(ctx context.Context, id string, ended ...string) {
	if ctx.Err() != nil {
		return // this lead is over: the next one settles what waits (settleWaiting)
	}
	s.mu.Lock()
	s.queueEnded[id] = append(s.queueEnded[id], ended...)
	if s.queueEnded[id] == nil {
		s.queueEnded[id] = []string{}
	}
	if s.queueBusy[id] {
		s.mu.Unlock()
		return
	}
	s.queueBusy[id] = true
	s.mu.Unlock()
	s.background(ctx, func() { s.settleWork(ctx, id) })
}

func (s *Scheduler) settleWork(ctx context.Context, id string) {
	for {
		s.mu.Lock()
		ended, ok := s.queueEnded[id]
		delete(s.queueEnded, id)
		if !ok || ctx.Err() != nil {
			delete(s.queueBusy, id)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		admitted, err := s.cmds.RunQueues.Settle(ctx, id, ended)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WithError(err).WithField("queueId", id).Warn("cannot settle a concurrency queue; the sweep will retry")
			}
			continue
		}
		for _, runID := range admitted {
			s.enqueue(ctx, runID)
		}
	}
}

// settleWaiting settles every queue a run waits in, freeing the slots of the runs the read
// model shows ended: a lead that takes over learns of ends it did not see, and a settle lost
// to an error is done again. The read model is never ahead of the log, so a run it shows
// ended has; one it does not show yet is freed by a later sweep. It also repairs what a store
// without atomic multi-stream appends may leave (commands.RunQueues.Repair).
func (s *Scheduler) settleWaiting(ctx context.Context) {
	ids, err := s.queries.WaitingQueues(ctx, maxWaitingQueues)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WithError(err).Warn("sweep for waiting runs failed")
		}
		return
	}
	for _, id := range ids {
		if err := s.settleQueue(ctx, id); err != nil && ctx.Err() == nil {
			s.log.WithError(err).WithField("queueId", id).Warn("cannot settle a concurrency queue; the next sweep will retry")
		}
	}
}

// maxWaitingRuns bounds the waiting runs of one queue a sweep compares with the queue.
const maxWaitingRuns = 1000

func (s *Scheduler) settleQueue(ctx context.Context, id string) error {
	waiting, err := s.queries.WaitingRuns(ctx, id, maxWaitingRuns) // before the queue: see Repair
	if err != nil {
		return err
	}
	q, err := s.cmds.RunQueues.Queue(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		q = run.Queue{} // no run of the key joined: a lost join, repaired below
	} else if err != nil {
		return err
	}
	if slices.ContainsFunc(waiting, func(r string) bool { return !slices.Contains(q.Waiting, r) }) {
		admitted, err := s.cmds.RunQueues.Repair(ctx, id, waiting)
		for _, runID := range admitted {
			s.enqueue(ctx, runID)
		}
		if err != nil {
			return err
		}
		s.settle(ctx, id)
	}
	ended, err := s.queries.EndedRuns(ctx, q.Running)
	if err != nil {
		return err
	}
	if len(ended) > 0 || len(q.Running) < q.Limit {
		s.settle(ctx, id, ended...) // a full queue none of whose runs ended has nothing to settle
	}
	return nil
}
