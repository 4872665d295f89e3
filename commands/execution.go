package commands

import (
	"bytes"
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
	cacheWindowAgg = aggregate[execution.CacheWindow]{evolve: execution.CacheWindow.Evolve}
	idempotencyAgg = aggregate[execution.IdempotencyRecord]{evolve: execution.IdempotencyRecord.Evolve}
)

// ExecutionStream is the stream of an execution.
func ExecutionStream(id string) string { return eventstore.StreamName(execution.Category, id) }

// SubmitExecution is a submit that passed request validation (the module exists and accepts
// the config and input).
type SubmitExecution struct {
	WorkspaceID string
	APIKeyID    string
	Module      string
	Input       json.RawMessage
	Config      json.RawMessage
	Attempts    int
	CostMilli   int64
	Callback    execution.Callback
	// IdempotencyKey, when set, maps every submit with the same key and BodyHash in 24 hours
	// to one execution.
	IdempotencyKey string
	BodyHash       string
	// CacheWindow is how long an identical call is free after the first; 0 disables it.
	CacheWindow time.Duration
}

// SubmitExecution accepts an execution and returns its state right after the submit. A call
// the cache window covers reuses the first call's output for free; otherwise the workspace's
// spendable balance must cover the module's cost (ErrInsufficientCredits).
func (h *Handler) SubmitExecution(ctx context.Context, c SubmitExecution) (execution.State, error) {
	id := uuid.NewString()
	if c.IdempotencyKey != "" {
		bound, err := h.bindIdempotencyKey(ctx, c, id)
		if err != nil {
			return execution.State{}, err
		}
		if bound != id {
			prev, err := h.Execution(ctx, bound)
			if err == nil {
				return prev, nil
			}
			if !errors.Is(err, domain.ErrNotFound) {
				return execution.State{}, err
			}
			id = bound // the first request stopped before creating it: create it now
		}
	}
	cachedFrom, err := h.cacheLeader(ctx, c, id)
	if err != nil {
		return execution.State{}, err
	}
	sub := execution.Submit{ExecutionID: id, WorkspaceID: c.WorkspaceID, APIKeyID: c.APIKeyID, Module: c.Module,
		Input: c.Input, Config: c.Config, Attempts: c.Attempts, CostMilli: c.CostMilli, Callback: c.Callback, CachedFrom: cachedFrom}
	var state execution.State
	_, err = execute(ctx, h, ExecutionStream(id), executionAgg, func(s execution.State) ([]domain.Event, error) {
		events, err := execution.DecideSubmit(s, sub, h.now())
		for _, e := range events {
			state = s.Evolve(e)
		}
		return events, err
	})
	if err != nil {
		return execution.State{}, wrap("submit execution", err)
	}
	return state, nil
}

// cacheLeader decides whether the call is free: it returns the execution whose output the
// call reuses, or "" after checking the balance and opening a window led by id.
func (h *Handler) cacheLeader(ctx context.Context, c SubmitExecution, id string) (string, error) {
	stream := ""
	if c.CacheWindow > 0 {
		key, err := CacheKey(c.WorkspaceID, c.Module, c.Input, c.Config)
		if err != nil {
			return "", err
		}
		stream = eventstore.StreamName(execution.CacheCategory, key)
		w, err := load(ctx, h, stream, cacheWindowAgg)
		if err != nil {
			return "", err
		}
		if leader, ok := w.state.Leader(h.now()); ok {
			return leader, nil
		}
	}
	if err := h.checkBalance(ctx, c.WorkspaceID, c.CostMilli); err != nil {
		return "", err
	}
	if stream == "" {
		return "", nil
	}
	leader := ""
	_, err := execute(ctx, h, stream, cacheWindowAgg, func(w execution.CacheWindow) ([]domain.Event, error) {
		leader, _ = w.Leader(h.now())
		return execution.DecideOpenWindow(w, stream, id, c.CacheWindow, h.now()), nil
	})
	if err != nil {
		return "", wrap("cache window", err)
	}
	return leader, nil
}

// checkBalance refuses a call the spendable balance cannot cover. The charge itself happens
// when the call completes; concurrent calls that pass this check together and overdraw end
// FAILED with insufficient credits instead of driving the balance negative.
//
// A balance read less than balanceTTL ago that covers the cost is trusted without reading the
// stream again: the check is advisory (the charge decides), and the billing stream of a busy
// workspace is the hottest read of a submit. A balance that seems short is always re-read.
func (h *Handler) checkBalance(ctx context.Context, workspaceID string, costMilli int64) error {
	if costMilli <= 0 {
		return nil
	}
	cost := billing.Credits(costMilli)
	if v, ok := h.balances.Load(workspaceID); ok {
		if seen := v.(seenBalance); h.now().Sub(seen.at) < balanceTTL && cost <= seen.total {
			return nil
		}
	}
	b, err := h.Balance(ctx, workspaceID)
	if err != nil {
		return err
	}
	h.balances.Store(workspaceID, seenBalance{total: b.Total(), at: h.now()})
	if cost > b.Total() {
		return fmt.Errorf("balance %s, cost %s: %w", b.Total(), cost, domain.ErrInsufficientCredits)
	}
	return nil
}

// balanceTTL is how long a balance read for the advisory submit check is reused.
const balanceTTL = time.Second

type seenBalance struct {
	total billing.Credits
	at    time.Time
}

func (h *Handler) bindIdempotencyKey(ctx context.Context, c SubmitExecution, id string) (string, error) {
	sum := sha256.Sum256([]byte(c.WorkspaceID + "\n" + c.IdempotencyKey))
	stream := eventstore.StreamName(execution.IdempotencyCategory, hex.EncodeToString(sum[:]))
	bound := ""
	_, err := execute(ctx, h, stream, idempotencyAgg, func(r execution.IdempotencyRecord) ([]domain.Event, error) {
		var events []domain.Event
		var err error
		bound, events, err = execution.DecideIdempotencyKey(r, c.WorkspaceID, c.BodyHash, id, h.now())
		return events, err
	})
	return bound, err
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

func canonicalJSON(raw json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Execution folds an execution from the event store (read-your-writes for GET).
func (h *Handler) Execution(ctx context.Context, id string) (execution.State, error) {
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

// ClaimExecution starts the execution's next attempt for worker, leased until now plus the
// lease it asks for the state (leases depend on the module). execution.ErrNotClaimable means
// another worker has it or it is finished.
func (h *Handler) ClaimExecution(ctx context.Context, id, worker string, lease func(execution.State) time.Duration) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideStart(s, worker, lease(s), h.now())
	})
}

// CompleteExecution records worker's output for attempt and the credits billed for it.
func (h *Handler) CompleteExecution(ctx context.Context, id, worker string, attempt int, output json.RawMessage, usage billing.Credits) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideComplete(s, worker, attempt, output, usage, h.now())
	})
}

// FailExecution records a failed attempt, to be retried after backoff while attempts remain
// and retry is true.
func (h *Handler) FailExecution(ctx context.Context, id, worker string, attempt int, failure json.RawMessage, retry bool, backoff time.Duration) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideFail(s, worker, attempt, failure, retry, backoff, h.now())
	})
}

func (h *Handler) changeExecution(ctx context.Context, id string, decide func(execution.State) ([]domain.Event, error)) (execution.State, error) {
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
