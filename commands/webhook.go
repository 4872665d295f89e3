package commands

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
)

// StartWebhookAttempt claims the execution's next webhook delivery attempt for worker until
// now+lease, appended at the revision read so that one instance wins.
// execution.ErrNoDeliveryDue means there is nothing to claim now.
func (h *Webhooks) StartWebhookAttempt(ctx context.Context, id, worker string, lease time.Duration) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookStart(s, worker, lease, h.now())
	})
}

// RecordWebhookOutcome records what worker's attempt came to. execution.ErrDeliveryLost means
// another worker took the attempt over (or it was recorded already).
func (h *Webhooks) RecordWebhookOutcome(ctx context.Context, id, worker string, attempt int, o execution.WebhookOutcome) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideWebhookOutcome(s, worker, attempt, o, h.now())
	})
}

// ReplayWebhook opens a new delivery round for a finished execution (replay-callback). While a
// round is open it changes nothing. It returns the state after the request.
func (h *Webhooks) ReplayWebhook(ctx context.Context, id string) (execution.State, error) {
	return h.changeExecution(ctx, id, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideReplay(s, h.now())
	})
}

// WebhookAttempts lists the callback delivery attempts of execution id, oldest first, read
// from its stream (the state keeps only the latest).
func (h *Webhooks) WebhookAttempts(ctx context.Context, id string) ([]execution.WebhookAttempt, error) {
	history, err := h.executionHistory(ctx, id)
	if err != nil {
		return nil, err
	}
	return execution.WebhookAttempts(history), nil
}
