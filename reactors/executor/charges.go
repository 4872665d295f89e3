package executor

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/eventstore"
)

// maxChargeBatch bounds the charges of one append to a billing stream.
const maxChargeBatch = 500

// charger batches the charges of this process per workspace: one workspace's billing stream
// takes one append at a time, so executions finishing together are billed together instead
// of racing for its next revision. Each charge carries the outcome to record with it, and a
// batch writes charges and outcomes in one commit (commands.ChargeAndFinish).
type charger struct {
	cmds *commands.Commands

	mu     sync.Mutex
	queues map[string][]*chargeCall
}

type chargeCall struct {
	item commands.ChargedFinish
	done chan chargeDone
}

// chargeDone is the fate of one charge: err is a store error, res the charge's own result.
type chargeDone struct {
	res commands.FinishResult
	err error
}

func newCharger(cmds *commands.Commands) *charger {
	return &charger{cmds: cmds, queues: map[string][]*chargeCall{}}
}

// charge bills item's charge and, when it can, records item's outcome in the same commit.
func (c *charger) charge(ctx context.Context, workspaceID string, item commands.ChargedFinish) (commands.FinishResult, error) {
	res, err := c.chargeAll(ctx, workspaceID, []commands.ChargedFinish{item})
	if err != nil {
		return commands.FinishResult{}, err
	}
	return res[0], nil
}

// chargeAll is charge of several items queued together, so that they go into one batch
// unless it is full (a chain's stages: commands.ChainNext). An error is the first item's store
// error, or ctx's; a later item's leaves that item unrecorded.
func (c *charger) chargeAll(ctx context.Context, workspaceID string, items []commands.ChargedFinish) ([]commands.FinishResult, error) {
	calls := make([]*chargeCall, len(items))
	for i, item := range items {
		calls[i] = &chargeCall{item: item, done: make(chan chargeDone, 1)}
	}
	c.mu.Lock()
	q, running := c.queues[workspaceID]
	c.queues[workspaceID] = append(q, calls...)
	c.mu.Unlock()
	if !running {
		// The batch outlives the caller that starts it and is written for many: it carries
		// no request's metadata (ChargedFinish.CreateMeta carries each submit's own).
		go c.flush(commands.WithMetadata(context.WithoutCancel(ctx), commands.Metadata{}), workspaceID)
	}
	results := make([]commands.FinishResult, len(calls))
	for i, call := range calls {
		select {
		case d := <-call.done:
			if d.err != nil && i == 0 {
				return nil, d.err
			}
			results[i] = d.res // a later item's error leaves it unrecorded
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return results, nil
}

// flush appends the workspace's queued charges batch by batch until the queue is empty.
// While another process charges the workspace too, each batch is gathered once the turn on its
// account is held (commands.AwaitAccountTurn), so it takes along what queued during the wait.
//
// The queue is looked at before the wait: a turn awaited for an empty queue would cost a round
// trip (and, held, a transaction) for nothing. Only this goroutine takes from the queue, so it
// is not empty after the wait either.
func (c *charger) flush(ctx context.Context, workspaceID string) {
	for {
		c.mu.Lock()
		if len(c.queues[workspaceID]) == 0 {
			delete(c.queues, workspaceID)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		held := c.cmds.Charges.AwaitAccountTurn(ctx, workspaceID)
		c.mu.Lock()
		q := c.queues[workspaceID]
		batch := q[:min(len(q), maxChargeBatch)]
		c.queues[workspaceID] = q[len(batch):]
		c.mu.Unlock()
		c.apply(ctx, held, workspaceID, batch)
	}
}

// apply writes one batch: charges and outcomes together, or, when that cannot be done in one
// go, the charges alone (their callers then record their outcomes themselves).
func (c *charger) apply(ctx context.Context, held *commands.AccountTurn, workspaceID string, batch []*chargeCall) {
	items := make([]commands.ChargedFinish, len(batch))
	for i, call := range batch {
		items[i] = call.item
	}
	results, err := c.cmds.Charges.ChargeAndFinishIn(ctx, held, workspaceID, items)
	if errors.Is(err, commands.ErrNotCombined) {
		results, err = c.separately(ctx, workspaceID, items)
	}
	for i, call := range batch {
		if err != nil {
			call.done <- chargeDone{err: err}
		} else {
			call.done <- chargeDone{res: results[i]}
		}
	}
}

// separately charges the batch's executions that exist; those the batch was to create are
// answered ErrNotCombined uncharged, for their callers to submit them first, and so are those
// charged only with their outcome (ChargedFinish.Combined), for their callers to read afresh.
func (c *charger) separately(ctx context.Context, workspaceID string, items []commands.ChargedFinish) ([]commands.FinishResult, error) {
	results := make([]commands.FinishResult, len(items))
	var existing []commands.ChargedFinish
	var at []int
	for i, it := range items {
		if len(it.Create) > 0 || it.Combined {
			results[i].Err = commands.ErrNotCombined
			continue
		}
		existing, at = append(existing, it), append(at, i)
	}
	if len(existing) == 0 {
		return results, nil
	}
	charged, err := c.chargeOnly(ctx, workspaceID, existing)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		results[i] = charged[j]
	}
	return results, nil
}

// chargeOnly appends the batch's charges, retrying while other processes win the race for
// the stream.
func (c *charger) chargeOnly(ctx context.Context, workspaceID string, items []commands.ChargedFinish) ([]commands.FinishResult, error) {
	reqs := make([]commands.ChargeRequest, len(items))
	for i, it := range items {
		reqs[i] = it.Charge
	}
	for backoff := 5 * time.Millisecond; ; backoff = min(backoff*2, time.Second) {
		errs, err := c.cmds.Billing.ChargeMany(ctx, workspaceID, reqs)
		if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			time.Sleep(time.Duration(rand.Int64N(int64(backoff))))
			continue
		}
		if err != nil {
			return nil, err
		}
		results := make([]commands.FinishResult, len(errs))
		for i, e := range errs {
			results[i].Err = e
		}
		return results, nil
	}
}
