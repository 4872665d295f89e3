package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/runnotify"
	"github.com/switchyard/switchyard/eventstore"
)

var runNotifyAgg = aggregate[runnotify.State]{evolve: runnotify.State.Evolve}

// RunNotifyStream is the stream of a run's workflow.run.terminal deliveries.
func RunNotifyStream(runID string) string { return eventstore.StreamName(runnotify.Category, runID) }

// RunNotification is a run and the delivery of its terminal webhook.
type RunNotification struct {
	Run      run.State
	Delivery runnotify.State
}

// Owed reports whether the run owes deliveries at all: it has finished and has a notify.
func (n RunNotification) Owed() bool {
	return n.Run.Status.Terminal() && n.Run.Definition.Notify != nil
}

// Due reports whether an attempt may be claimed at now.
func (n RunNotification) Due(now time.Time) bool { return n.Delivery.Due(n.Owed(), now) }

// NextAt is when the next attempt may be claimed (zero when none is owed).
func (n RunNotification) NextAt() time.Time { return n.Delivery.NextAt(n.Owed()) }

// RunNotification reads run id and its deliveries; an unknown run is domain.ErrNotFound.
func (h *Webhooks) RunNotification(ctx context.Context, id string) (RunNotification, error) {
	if _, err := uuid.Parse(id); err != nil {
		return RunNotification{}, fmt.Errorf("run %q: %w", id, domain.ErrNotFound)
	}
	r, err := load(ctx, h, RunStream(id), runAgg)
	if err != nil {
		return RunNotification{}, err
	}
	if !r.state.Exists {
		return RunNotification{}, fmt.Errorf("run %s: %w", id, domain.ErrNotFound)
	}
	d, err := load(ctx, h, RunNotifyStream(id), runNotifyAgg)
	if err != nil {
		return RunNotification{}, err
	}
	return RunNotification{Run: r.state, Delivery: d.state}, nil
}

// changeRunNotify decides on run id's delivery stream with the run as read first: the run
// is finished before any delivery is decided, and a finished run changes no more.
func (h *Webhooks) changeRunNotify(ctx context.Context, id string, decide func(RunNotification) ([]domain.Event, error)) (RunNotification, error) {
	n, err := h.RunNotification(ctx, id)
	if err != nil {
		return n, err
	}
	st, _, err := executeFold(ctx, h, RunNotifyStream(id), runNotifyAgg, func(s runnotify.State) ([]domain.Event, error) {
		n.Delivery = s
		return decide(n)
	})
	n.Delivery = st
	return n, err
}

// StartRunNotifyAttempt claims run id's next delivery attempt for worker until now+lease.
// execution.ErrNoDeliveryDue means there is nothing to claim now.
func (h *Webhooks) StartRunNotifyAttempt(ctx context.Context, id, worker string, lease time.Duration) (RunNotification, error) {
	return h.changeRunNotify(ctx, id, func(n RunNotification) ([]domain.Event, error) {
		return runnotify.DecideStart(n.Delivery, id, n.Owed(), worker, lease, h.now())
	})
}

// RecordRunNotifyOutcome records what worker's attempt came to. execution.ErrDeliveryLost
// means another worker took the attempt over.
func (h *Webhooks) RecordRunNotifyOutcome(ctx context.Context, id, worker string, attempt int, o execution.WebhookOutcome) (RunNotification, error) {
	return h.changeRunNotify(ctx, id, func(n RunNotification) ([]domain.Event, error) {
		return runnotify.DecideOutcome(n.Delivery, worker, attempt, o, h.now())
	})
}

// ReplayRunNotify opens a new delivery round of a finished run's terminal webhook
// (POST /v1/sdk/workflows/executions/:runId/replay-callback).
func (h *Webhooks) ReplayRunNotify(ctx context.Context, id string) (RunNotification, error) {
	return h.changeRunNotify(ctx, id, func(n RunNotification) ([]domain.Event, error) {
		return runnotify.DecideReplay(n.Delivery, id, n.Run.Status.Terminal(), n.Run.Definition.Notify != nil, h.now())
	})
}

// RunMayNotify is false when this process holds run id in its state cache and its definition
// has no notify: most runs, whose end then costs the dispatcher no read. A run's definition
// never changes after its trigger, so any cached revision answers.
func (h *Webhooks) RunMayNotify(id string) bool {
	c, ok := h.cache.get(RunStream(id))
	if !ok {
		return true
	}
	l, ok := c.(loaded[run.State])
	return !ok || !l.exists || l.state.Definition.Notify != nil
}
