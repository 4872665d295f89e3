package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

var (
	executionAgg   = aggregate[execution.State]{evolve: execution.State.Evolve}
	cacheWindowAgg = aggregate[execution.CacheWindow]{evolve: execution.CacheWindow.Evolve, sharesEvents: true}
	idempotencyAgg = aggregate[execution.IdempotencyRecord]{evolve: execution.IdempotencyRecord.Evolve}
)

// ExecutionStream is the stream of an execution.
func ExecutionStream(id string) string { return eventstore.StreamName(execution.Category, id) }

// checkBalance refuses a call the spendable balance cannot cover. The charge itself happens
// when the call completes; concurrent calls that pass this check together and overdraw end
// FAILED with insufficient credits instead of driving the balance negative.
//
// A balance read less than balanceTTL ago that covers the cost is trusted without reading the
// stream again: the check is advisory (the charge decides), and the billing stream of a busy
// workspace is the hottest read of a submit. A balance that seems short is always re-read.
func (h *balanceCheck) checkBalance(ctx context.Context, workspaceID string, costMilli int64) error {
	if costMilli <= 0 {
		return nil
	}
	cost := billing.Credits(costMilli)
	if v, ok := h.balances.Load(workspaceID); ok {
		if seen := v.(seenBalance); h.now().Sub(seen.at) < balanceTTL && cost <= seen.total {
			return nil
		}
	}
	total, err := h.readBalance(ctx, workspaceID)
	if err != nil {
		return err
	}
	if cost > total {
		return fmt.Errorf("balance %s, cost %s: %w", total, cost, domain.ErrInsufficientCredits)
	}
	return nil
}

// readBalance reads workspaceID's spendable balance and remembers it for checkBalance. The
// submits that find the remembered balance expired together share one read: each would
// otherwise read and decode the same charges, and where another process charges the account
// that is every charge since the last read, once per waiting submit.
func (h *balanceCheck) readBalance(ctx context.Context, workspaceID string) (billing.Credits, error) {
	read := h.balanceReads.DoChan(workspaceID, func() (any, error) {
		// One caller's cancellation must not fail the others sharing its read.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), balanceReadTimeout)
		defer cancel()
		b, err := h.billing.Balance(rctx, workspaceID)
		if err != nil {
			return billing.Credits(0), err
		}
		h.balances.Store(workspaceID, seenBalance{total: b.Total(), at: h.now()})
		return b.Total(), nil
	})
	select {
	case r := <-read:
		if r.Err != nil {
			return 0, r.Err
		}
		return r.Val.(billing.Credits), nil
	case <-ctx.Done():
		return 0, ctx.Err() // the read goes on for the others sharing it
	}
}

// balanceReadTimeout bounds a shared balance read, which no single caller's context ends.
const balanceReadTimeout = 10 * time.Second

// balanceTTL is how long a balance read for the advisory submit check is reused.
const balanceTTL = time.Second

type seenBalance struct {
	total billing.Credits
	at    time.Time
}

// CacheKey identifies identical calls of a workspace: the module and the canonical JSON of
// input and config (object keys sorted, insignificant space removed).
func CacheKey(workspaceID, module string, input, config json.RawMessage) (string, error) {
	ci, err := canonicalJSON(input)
	if err != nil {
		return "", domain.Invalid("input", "is not valid JSON")
	}
	cc, err := canonicalJSON(config)
	if err != nil {
		return "", domain.Invalid("config", "is not valid JSON")
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(workspaceID), []byte(module), ci, cc} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Execution folds an execution from the event store (read-your-writes for GET).
func (h *executionStreams) Execution(ctx context.Context, id string) (execution.State, error) {
	if _, err := uuid.Parse(id); err != nil {
		return execution.State{}, fmt.Errorf("execution %q: %w", id, domain.ErrNotFound)
	}
	l, err := load(ctx, h, ExecutionStream(id), executionAgg)
	if err != nil {
		return execution.State{}, err
	}
	if !l.state.Exists {
		return execution.State{}, fmt.Errorf("execution %s: %w", id, domain.ErrNotFound)
	}
	return l.state, nil
}

// CachedExecution is the execution as this process last wrote or read it, when that is at
// revision or later, without a read: a reactor woken by an event this process wrote needs
// none.
func (h *executionStreams) CachedExecution(id string, revision uint64) (execution.State, bool) {
	c, ok := h.cache.get(ExecutionStream(id))
	if !ok {
		return execution.State{}, false
	}
	l, ok := c.(loaded[execution.State])
	if !ok || !l.exists || l.revision < revision {
		return execution.State{}, false
	}
	return l.state, true
}

// ClaimExecution starts the execution's next attempt for worker, leased until now plus the
// lease it asks for the state (leases depend on the module). execution.ErrNotClaimable means
// another worker has it or it is finished.
func (h *Attempts) ClaimExecution(ctx context.Context, id, worker string, lease func(execution.State) time.Duration) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideStart(s, worker, lease(s), h.now())
	})
}

// CompleteExecution records worker's output for attempt and the credits billed for it.
func (h *Attempts) CompleteExecution(ctx context.Context, id, worker string, attempt int, output json.RawMessage, usage billing.Credits) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideComplete(s, worker, attempt, output, usage, h.now())
	})
}

// FailExecution records a failed attempt, to be retried after backoff while attempts remain
// and retry is true (a stage's retry policy decides both when there is one).
func (h *Attempts) FailExecution(ctx context.Context, id, worker string, attempt int, failure json.RawMessage, retry bool, backoff time.Duration) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideFail(s, worker, attempt, failure, retry, backoff, h.now())
	})
}

func (h *executionChanges) changeExecution(ctx context.Context, id string, decide func(execution.State) ([]domain.Event, error)) (execution.State, error) {
	if after, ok, err := h.changeCachedExecution(ctx, id, decide); ok {
		return after, err
	}
	var after execution.State
	_, err := execute(ctx, h, ExecutionStream(id), executionAgg, func(s execution.State) ([]domain.Event, error) {
		if !s.Exists {
			return nil, fmt.Errorf("execution %s: %w", id, domain.ErrNotFound)
		}
		events, err := decide(s)
		after = s
		for _, e := range events {
			after = after.Evolve(e)
		}
		return events, err
	})
	return after, err
}

// eventsBatch is how many events ReadEvents reads at a time.
const eventsBatch = 256

// ReadEvents reads stream's events from revision from to its end, decoding each for apply,
// and returns the revision after the last one read (from when none was). A stream that does
// not exist is empty. It serves readers that follow a stream as it grows (SSE).
func (h *executionStreams) ReadEvents(ctx context.Context, stream string, from uint64, apply func(rev uint64, ev domain.Event) error) (uint64, error) {
	for {
		recs, err := h.store.ReadStream(ctx, stream, from, eventsBatch)
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return from, nil
		}
		if err != nil {
			return from, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, rec := range recs {
			ev, err := domain.Events.Decode(rec.Type, rec.Data)
			if err != nil {
				return from, fmt.Errorf("fold %s@%d: %w", stream, rec.Revision, err)
			}
			if err := apply(rec.Revision, ev); err != nil {
				return from, err
			}
			from = rec.Revision + 1
		}
		if len(recs) < eventsBatch {
			return from, nil
		}
	}
}

// changeCachedExecution decides on the execution's cached state and appends at its revision
// without reading the stream first: the executor's steps of an execution follow each other
// on one process, whose cache then holds the current state, and the expected revision makes
// the append fail if it does not. It reports false (nothing done) when there is no cached
// state, when the append loses (the stream moved on), or when the decision appends nothing or
// refuses: a refusal may come from a stale state, so the caller decides again on a fresh read.
func (h *executionChanges) changeCachedExecution(ctx context.Context, id string, decide func(execution.State) ([]domain.Event, error)) (execution.State, bool, error) {
	stream := ExecutionStream(id)
	c, ok := h.cache.get(stream)
	if !ok {
		return execution.State{}, false, nil
	}
	cur, ok := c.(loaded[execution.State])
	if !ok || !cur.state.Exists {
		return execution.State{}, false, nil
	}
	events, err := decide(cur.state)
	if err != nil || len(events) == 0 {
		return execution.State{}, false, nil
	}
	res, err := appendEvents(ctx, h, stream, cur.expected(), events)
	if isConflict(err) {
		h.cache.drop(stream)
		return execution.State{}, false, nil
	}
	if err != nil {
		return execution.State{}, true, err
	}
	for _, e := range events {
		cur.state = cur.state.Evolve(e)
	}
	cur.revision = res.Revision
	h.cache.put(stream, cur)
	return cur.state, true, nil
}
