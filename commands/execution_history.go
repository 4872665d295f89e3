package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// ExecutionAttempts lists the module attempts of execution id, oldest first, read from its
// stream (the state keeps only the latest).
func (h *Executions) ExecutionAttempts(ctx context.Context, id string) ([]execution.Attempt, error) {
	history, err := h.executionHistory(ctx, id)
	if err != nil {
		return nil, err
	}
	return execution.Attempts(history), nil
}

// executionHistory reads every event of execution id's stream, for the histories the folded
// state does not keep (module attempts, webhook deliveries).
func (h *executionStreams) executionHistory(ctx context.Context, id string) ([]domain.Event, error) {
	var history []domain.Event
	stream := ExecutionStream(id)
	for from := uint64(0); ; {
		recs, err := h.store.ReadStream(ctx, stream, from, readBatch)
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil, fmt.Errorf("execution %s: %w", id, domain.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, rec := range recs {
			ev, err := domain.Events.Decode(rec.Type, rec.Data)
			if err != nil {
				return nil, fmt.Errorf("decode %s@%d: %w", stream, rec.Revision, err)
			}
			history = append(history, ev)
		}
		if len(recs) < readBatch {
			return history, nil
		}
		from = recs[len(recs)-1].Revision + 1
	}
}
