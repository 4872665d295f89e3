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

// maxAcrossBatch bounds the charges of one append across workspaces; a workspace's batch is
// never split to fit.
const maxAcrossBatch = 1000

// charger batches the charges of this process per workspace: one workspace's billing stream
// takes one append at a time, so executions finishing together are billed together instead
// of racing for its next revision. Each charge carries the outcome to record with it, and a
// batch writes charges and outcomes in one commit (commands.ChargeAndFinish).
//
// The workspaces' batches go together, a round at a time, in one commit
// (commands.ChargeAndFinishAcross): with the calls spread over many workspaces, each
// workspace's batch alone is small, and a commit apiece cost the database three times the work
// of one workspace. While another process charges some of them too, the round first takes one
// turn on their accounts (commands.AwaitAccountTurns) and gathers once it holds it, so the
// round takes along what queued during the wait.
type charger struct {
	cmds    *commands.Commands
	metrics roundMetrics

	mu     sync.Mutex
	queues map[string][]*chargeCall
	// flushing is whether the rounds' goroutine runs.
	flushing bool
	// apart holds the workspaces whose last batch goes the separate way (commands.ErrNotCombined)
	// beside the rounds: their next batch waits for it, as one account takes one append at a
	// time, and the others do not.
	apart map[string]bool
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

func newCharger(cmds *commands.Commands, m roundMetrics) *charger {
	return &charger{cmds: cmds, metrics: m, queues: map[string][]*chargeCall{}, apart: map[string]bool{}}
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
	c.queues[workspaceID] = append(c.queues[workspaceID], calls...)
	c.startLocked(ctx)
	c.mu.Unlock()
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

// startLocked starts the rounds' goroutine unless it runs; c.mu is held.
func (c *charger) startLocked(ctx context.Context) {
	if !c.flushing {
		c.flushing = true
		// The rounds outlive the caller that starts them and are written for many: they carry
		// no request's metadata (ChargedFinish.CreateMeta carries each submit's own).
		go c.flush(commands.WithMetadata(context.WithoutCancel(ctx), commands.Metadata{}))
	}
}

// flush writes rounds of the queued batches, each round in one commit, until none is queued.
// Whatever queues while a round commits goes into the next.
//
// The queues are looked at before a turn is awaited: a turn awaited for nothing would cost a
// round trip (and, held, a transaction). Only this goroutine takes from the queues, so those
// it awaited a turn for are not empty after the wait either.
func (c *charger) flush(ctx context.Context) {
	for {
		c.mu.Lock()
		queued := make([]string, 0, len(c.queues))
		for ws, q := range c.queues {
			switch {
			case len(q) == 0:
				delete(c.queues, ws)
			case !c.apart[ws]:
				queued = append(queued, ws)
			}
		}
		if len(queued) == 0 {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		waited := time.Now()
		held := c.cmds.Charges.AwaitAccountTurns(ctx, queued)
		began := time.Now()
		if held != nil {
			c.metrics.turnWait.Observe(began.Sub(waited).Seconds())
		}
		round, calls := c.gather(held)
		out := c.cmds.Charges.ChargeAndFinishAcross(ctx, held, round)
		for i, r := range out {
			c.answer(ctx, round[i].WorkspaceID, calls[i], r.Results, r.Err)
		}
		c.observe(calls, began)
	}
}

// observe records a round of calls that began (was gathered) at began.
func (c *charger) observe(calls [][]*chargeCall, began time.Time) {
	n := 0
	for _, batch := range calls {
		n += len(batch)
	}
	if n == 0 {
		return
	}
	c.metrics.seconds.Observe(time.Since(began).Seconds())
	c.metrics.size.Observe(float64(n))
}

// answer hands each call of a written batch its fate. A batch that could not be written in one
// go (commands.ErrNotCombined) is charged the separate way first, beside the rounds: its
// retries (while another process charges the workspace too) hold up that workspace alone.
func (c *charger) answer(ctx context.Context, workspaceID string, batch []*chargeCall, results []commands.FinishResult, err error) {
	if !errors.Is(err, commands.ErrNotCombined) {
		deliver(batch, results, err)
		return
	}
	c.mu.Lock()
	c.apart[workspaceID] = true
	c.mu.Unlock()
	go func() {
		results, err := c.separately(ctx, workspaceID, items(batch))
		deliver(batch, results, err)
		c.mu.Lock()
		delete(c.apart, workspaceID)
		if len(c.queues[workspaceID]) > 0 {
			c.startLocked(ctx)
		}
		c.mu.Unlock()
	}()
}

// gather takes the next round from the queues: each workspace's queued charges up to
// maxChargeBatch, workspaces in map order (so none is always first) until the round holds
// maxAcrossBatch. Within a turn, a workspace taking turns that the turn is not on (its
// charges queued during the wait) is left for the next round, which takes the turn on it too:
// taken now, it would be written alone, a commit and a turn of its own.
func (c *charger) gather(held *commands.AccountTurns) ([]commands.WorkspaceCharges, [][]*chargeCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var round []commands.WorkspaceCharges
	var calls [][]*chargeCall
	size := 0
	for ws, q := range c.queues {
		if len(q) == 0 || size >= maxAcrossBatch || c.apart[ws] || (held != nil && !held.Holds(ws) && c.cmds.Charges.Contended(ws)) {
			continue
		}
		batch := q[:min(len(q), maxChargeBatch)]
		c.queues[ws] = q[len(batch):]
		size += len(batch)
		round, calls = append(round, commands.WorkspaceCharges{WorkspaceID: ws, Items: items(batch)}), append(calls, batch)
	}
	return round, calls
}

// items is the batch's items.
func items(batch []*chargeCall) []commands.ChargedFinish {
	out := make([]commands.ChargedFinish, len(batch))
	for i, call := range batch {
		out[i] = call.item
	}
	return out
}

// deliver hands each call of a batch its fate: err, or its result.
func deliver(batch []*chargeCall, results []commands.FinishResult, err error) {
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
