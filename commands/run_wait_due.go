package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

// Waits due together (docs/performance.md, "Durable waits"). Ten thousand waits due in the
// same second, each stepped by a read of its run and then an append, end at the rate reads
// and appends take turns (about 1,000 a second): the last ends ten seconds late. So the
// scheduler has their runs read while they are due soon (PrefetchDue), into a cache of their
// own, and when they are due FireDue decides every one at once, without a read, and appends
// the decisions all together, where the event store's group commit shares commits among them.
// Each append still expects the revision its decision was taken on: a run that moved meanwhile
// (a signal) is read again and decided again, so a wait ends once, as a step would end it.

// dueCacheSize bounds the runs read ahead of their waits' due time: what the scheduler holds
// within its horizon (its WaitBatch default), so the cache's memory is bounded by it, not by
// the waits in the log.
const dueCacheSize = 2 * 20_000

// Parallelism of the reads ahead (a run each) and of the appends of the waits fired together:
// enough appends in flight that full groups queue while the group commit's slots are busy, so
// it starts its burst groups (eventstore/postgres, group.go: 256 appends a group, up to four
// groups at once); with 512, two groups in flight held every append and none queued.
const (
	prefetchParallel = 8
	fireParallel     = 2048
)

// FiredWait is one run of FireDue: the run after its step and the module stages it dispatched,
// as StepRun gives them, or Err when it could not be stepped here (the caller steps it as any
// other run then).
type FiredWait struct {
	RunID      string
	State      run.State
	Dispatched []run.Stage
	Err        error
}

// errNotFired is a fire that decided nothing on the state read ahead: the caller's step
// decides on the run as it is now.
var errNotFired = errors.New("nothing to step on the state read ahead")

// PrefetchDue reads the runs whose waits are due soon into the due cache, those not in it
// already, a few at a time. A run whose read fails is left out: its fire reads it.
func (h *Waits) PrefetchDue(ctx context.Context, runIDs []string) {
	sem := make(chan struct{}, prefetchParallel)
	var wg sync.WaitGroup
	for _, id := range runIDs {
		stream := RunStream(id)
		if _, ok := h.due.get(stream); ok {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if cur, err := readAhead(ctx, h, stream); err == nil && cur.exists {
				h.due.put(stream, cur)
			}
		})
	}
	wg.Wait()
}

// readAhead folds a run's stream on from the state cache without putting the result there: ten
// thousand runs read ahead would push out what the process uses meanwhile (billing accounts,
// executions in flight).
func readAhead(ctx context.Context, h *Waits, stream string) (loaded[run.State], error) {
	cur, from, shared := cachedState(h, stream, runAgg)
	if shared {
		cur.state = runAgg.clone(cur.state)
	}
	for {
		events, err := h.store.ReadStream(ctx, stream, from, readBatch)
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return loaded[run.State]{}, nil
		}
		if err != nil {
			return cur, fmt.Errorf("read %s: %w", stream, err)
		}
		if cur, _, err = fold(cur, false, runAgg, stream, events); err != nil {
			return cur, err
		}
		if len(events) < readBatch {
			return cur, nil
		}
		from = cur.revision + 1
	}
}

// FireDue steps runs whose waits are due now, as StepRun steps them with no facts: each is
// decided at its own time on the state read ahead (or cached), and its decision appended at
// once, fireParallel appends in flight, so the first commits are under way while the last runs
// are decided. A run with no state at hand, or whose decision on it writes nothing, is answered
// with an error: the caller steps it then.
func (h *Waits) FireDue(ctx context.Context, runIDs []string) []FiredWait {
	out := make([]FiredWait, len(runIDs))
	eval := runEval(ctx)
	sem := make(chan struct{}, fireParallel)
	var wg sync.WaitGroup
	for i, id := range runIDs {
		out[i].RunID = id
		cur, ok := h.ahead(RunStream(id))
		if !ok {
			out[i].Err = errNotFired
			continue
		}
		events, dispatched := run.StepWith(cur.state, nil, eval, h.now())
		if len(events) == 0 {
			out[i].Err = errNotFired
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].State, out[i].Dispatched, out[i].Err = h.appendFired(ctx, id, cur, events, dispatched, eval)
		})
	}
	wg.Wait()
	return out
}

// appendFired appends a fired wait's decision, taken on cur, expecting cur's revision; a run
// that moved since it was read ahead (a signal) is decided again on what it is now.
func (h *Waits) appendFired(ctx context.Context, runID string, cur loaded[run.State], events []domain.Event, dispatched []run.Stage, eval run.Eval) (run.State, []run.Stage, error) {
	first := true
	st, _, err := executeFrom(ctx, h, RunStream(runID), runAgg, &cur, func(s run.State) ([]domain.Event, error) {
		if first {
			first = false
			return events, nil
		}
		events, dispatched = run.StepWith(s, nil, eval, h.now())
		return events, nil
	})
	return st, dispatched, wrap("fire wait of run "+runID, err)
}

// ahead is a run's state read ahead (taken out of the due cache: it is fired once), or else
// the state cache's, copied; false when neither holds it.
func (h *Waits) ahead(stream string) (loaded[run.State], bool) {
	if v, ok := h.due.take(stream); ok {
		if cur, ok := v.(loaded[run.State]); ok {
			// The state cache may have moved on since (a signal stepped the run here).
			if have, _, shared := cachedState(h, stream, runAgg); !shared || have.revision <= cur.revision {
				return cur, true
			}
		}
	}
	cur, _, shared := cachedState(h, stream, runAgg)
	if !shared || !cur.exists {
		return cur, false
	}
	cur.state = runAgg.clone(cur.state)
	return cur, true
}
