package executor

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
)

// maxChargeBatch bounds the charges of one append to a billing stream.
const maxChargeBatch = 500

// charger batches the charges of this process per workspace: one workspace's billing stream
// takes one append at a time, so executions finishing together are billed together instead
// of racing for its next revision.
type charger struct {
	cmds *commands.Handler

	mu     sync.Mutex
	queues map[string][]*chargeCall
}

type chargeCall struct {
	req  commands.ChargeRequest
	done chan error
}

func newCharger(cmds *commands.Handler) *charger {
	return &charger{cmds: cmds, queues: map[string][]*chargeCall{}}
}

// charge bills amount for cause and returns nil, ErrInsufficientCredits or a store error.
func (c *charger) charge(ctx context.Context, workspaceID, cause string, amount billing.Credits) error {
	call := &chargeCall{req: commands.ChargeRequest{Cause: cause, Amount: amount}, done: make(chan error, 1)}
	c.mu.Lock()
	q, running := c.queues[workspaceID]
	c.queues[workspaceID] = append(q, call)
	c.mu.Unlock()
	if !running {
		go c.flush(context.WithoutCancel(ctx), workspaceID)
	}
	select {
	case err := <-call.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush appends the workspace's queued charges batch by batch until the queue is empty.
func (c *charger) flush(ctx context.Context, workspaceID string) {
	for {
		c.mu.Lock()
		q := c.queues[workspaceID]
		if len(q) == 0 {
			delete(c.queues, workspaceID)
			c.mu.Unlock()
			return
		}
		batch := q[:min(len(q), maxChargeBatch)]
		c.queues[workspaceID] = q[len(batch):]
		c.mu.Unlock()
		c.apply(ctx, workspaceID, batch)
	}
}

// apply appends one batch, retrying while other processes win the race for the stream.
func (c *charger) apply(ctx context.Context, workspaceID string, batch []*chargeCall) {
	reqs := make([]commands.ChargeRequest, len(batch))
	for i, call := range batch {
		reqs[i] = call.req
	}
	var results []error
	var err error
	for backoff := 5 * time.Millisecond; ; backoff = min(backoff*2, time.Second) {
		results, err = c.cmds.ChargeMany(ctx, workspaceID, reqs)
		if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			break
		}
		time.Sleep(time.Duration(rand.Int64N(int64(backoff))))
	}
	for i, call := range batch {
		if err != nil {
			call.done <- err
		} else {
			call.done <- results[i]
		}
	}
}
