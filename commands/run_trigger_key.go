package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

var triggerKeyAgg = aggregate[run.TriggerKey]{evolve: run.TriggerKey.Evolve}

// triggerKeyStream is the key's stream, per workspace as submit's keys are.
func triggerKeyStream(c TriggerWorkflow) string {
	sum := sha256.Sum256([]byte(c.WorkspaceID + "\n" + c.IdempotencyKey))
	return eventstore.StreamName(run.TriggerKeyCategory, hex.EncodeToString(sum[:]))
}

// keyedRuns reads, without appending, the runs a live key is bound to (found false when the
// trigger has no key or the key is free); a key bound to another request is
// run.ErrTriggerKeyReused.
func (h *Workflows) keyedRuns(ctx context.Context, c TriggerWorkflow) ([]run.KeyedRun, bool, error) {
	if c.IdempotencyKey == "" {
		return nil, false, nil
	}
	l, err := load(ctx, h, triggerKeyStream(c), triggerKeyAgg)
	if err != nil {
		return nil, false, fmt.Errorf("idempotency key: %w", err)
	}
	if !l.state.Live(h.now()) {
		return nil, false, nil
	}
	runs, _, err := run.DecideTriggerKey(l.state, c.WorkspaceID, c.WorkflowID, c.BodyHash, nil, h.now())
	return runs, err == nil, err
}

// bindTriggerKey binds the key to planned, or returns the runs a concurrent trigger bound it
// to first.
func (h *Workflows) bindTriggerKey(ctx context.Context, c TriggerWorkflow, planned []run.KeyedRun) ([]run.KeyedRun, error) {
	var bound []run.KeyedRun
	_, err := execute(ctx, h, triggerKeyStream(c), triggerKeyAgg, func(k run.TriggerKey) ([]domain.Event, error) {
		var events []domain.Event
		var err error
		bound, events, err = run.DecideTriggerKey(k, c.WorkspaceID, c.WorkflowID, c.BodyHash, planned, h.now())
		return events, err
	})
	if err != nil {
		return nil, fmt.Errorf("idempotency key: %w", err)
	}
	return bound, nil
}
