package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/runnotify"
	"github.com/switchyard/switchyard/eventstore"
)

// EventRunTerminal is the x-event of a run's terminal webhook, sent to its definition's notify.
const EventRunTerminal = "workflow.run.terminal"

// runKey marks a run in the dispatcher's in-flight and timer maps, beside execution ids.
const runKey = "run:"

// runFilter selects what makes a run's delivery due on the live path.
func runFilter() eventstore.Filter {
	return eventstore.Filter{Types: []string{run.Finished{}.EventType(), runnotify.ReplayRequested{}.EventType()}}
}

// runEvent dispatches the run ev is about, unless this process knows the run has no notify.
func (d *Dispatcher) runEvent(ctx context.Context, ev eventstore.RecordedEvent) {
	id := ev.Stream[strings.IndexByte(ev.Stream, '-')+1:]
	if ev.Type == (runnotify.ReplayRequested{}).EventType() || d.cmds.Webhooks.RunMayNotify(id) {
		d.dispatch(ctx, runKey+id)
	}
}

// sweepRuns dispatches the runs whose delivery the live path missed.
func (d *Dispatcher) sweepRuns(ctx context.Context) {
	ids, err := d.queries.DueRunNotifications(ctx, d.opts.Now(), d.opts.SweepGrace, 4*d.opts.Concurrency)
	if err != nil {
		if ctx.Err() == nil {
			d.log.WithError(err).Warn("sweep for due run notifications failed")
		}
		return
	}
	for _, id := range ids {
		d.dispatch(ctx, runKey+id)
	}
}

// processRun claims run id's due attempt, sends the run detail and records the outcome.
func (d *Dispatcher) processRun(ctx context.Context, id string) {
	log := d.log.WithField("runId", id)
	n, err := d.cmds.Webhooks.RunNotification(ctx, id)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, domain.ErrNotFound) {
			log.WithError(err).Warn("cannot load run for delivery; a sweep will retry")
		}
		return
	}
	if !n.Due(d.opts.Now()) {
		if at := n.NextAt(); !at.IsZero() {
			d.schedule(ctx, runKey+id, at)
		}
		return
	}
	n, err = d.cmds.Webhooks.StartRunNotifyAttempt(ctx, id, d.opts.Worker, d.opts.Timeout+d.opts.LeaseMargin)
	if errors.Is(err, execution.ErrNoDeliveryDue) {
		return // another instance claimed it
	}
	if err != nil {
		if ctx.Err() == nil {
			log.WithError(err).Warn("cannot claim run notification attempt; a sweep will retry")
		}
		return
	}
	attempt := n.Delivery.AttemptCount
	work := context.WithoutCancel(ctx) // as process: a send cut short would only be repeated
	outcome := d.sendRun(work, n, attempt)
	after, err := d.cmds.Webhooks.RecordRunNotifyOutcome(work, id, d.opts.Worker, attempt, outcome)
	switch {
	case errors.Is(err, execution.ErrDeliveryLost):
		log.WithField("attempt", attempt).Info("run notification attempt taken over before its outcome was recorded")
		return
	case err != nil:
		log.WithError(err).WithField("attempt", attempt).Error("cannot record run notification outcome; the attempt will be repeated after its lease")
		return
	}
	if at := after.NextAt(); !at.IsZero() {
		d.schedule(ctx, runKey+id, at)
	}
}

// sendRun posts the run detail (GET /v1/sdk/workflows/executions/:runId's body) to the notify.
func (d *Dispatcher) sendRun(ctx context.Context, n commands.RunNotification, attempt int) execution.WebhookOutcome {
	body, err := json.Marshal(n.Run.Detail())
	if err != nil {
		return execution.WebhookOutcome{Error: errorJSON(0, "", "encode the run: "+err.Error()), Stop: true}
	}
	nt := n.Run.Definition.Notify
	t := target{URL: nt.URL, SealedSecret: nt.SealedSecret, SealedHeaders: nt.SealedHeaders, Event: EventRunTerminal,
		DeliveryID: n.Run.ID + ":" + strconv.Itoa(attempt), Field: "notify"}
	return d.deliver(ctx, t, body, n.Delivery.RoundAttempt(attempt), d.log.WithField("runId", n.Run.ID).WithField("attempt", attempt))
}
