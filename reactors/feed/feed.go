// Package feed is the reactors' live view of the event log: events after the head at the
// moment it opens, in order, surviving subscription errors by resubscribing from the last
// event delivered, so a reactor never sees a gap. With the PostgreSQL event store every feed of
// a process is fed by the store's one shared log tail (eventstore/postgres, tail.go), so a
// feed adds no reads of the log of its own once it has caught up.
package feed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/eventstore"
)

// Open subscribes from the log's head before returning, so every event appended after Open
// returns is delivered; the channel closes when ctx ends.
func Open(ctx context.Context, store eventstore.Store, filter eventstore.Filter, log logrus.FieldLogger) (<-chan eventstore.RecordedEvent, error) {
	head, err := store.HeadPosition(ctx)
	if err != nil {
		return nil, fmt.Errorf("feed: head position: %w", err)
	}
	sub, err := store.Subscribe(ctx, head, filter)
	if err != nil {
		return nil, fmt.Errorf("feed: subscribe: %w", err)
	}
	if log == nil {
		log = logrus.StandardLogger()
	}
	out := make(chan eventstore.RecordedEvent)
	go pump(ctx, store, filter, log, sub, head, out)
	return out, nil
}

func pump(ctx context.Context, store eventstore.Store, filter eventstore.Filter, log logrus.FieldLogger,
	sub eventstore.Subscription, pos eventstore.Position, out chan<- eventstore.RecordedEvent) {
	defer close(out)
	for {
		pos = forward(ctx, sub, pos, out)
		sub.Close()
		if ctx.Err() != nil {
			return
		}
		if err := sub.Err(); err != nil && !errors.Is(err, context.Canceled) {
			log.WithError(err).Warn("event subscription ended; resubscribing from the last event")
		}
		if sub = resubscribe(ctx, store, filter, pos); sub == nil {
			return
		}
	}
}

// forward passes events on until the subscription ends, returning the last position passed.
func forward(ctx context.Context, sub eventstore.Subscription, pos eventstore.Position, out chan<- eventstore.RecordedEvent) eventstore.Position {
	for ev := range sub.Events() {
		select {
		case out <- ev:
			pos = ev.Position
		case <-ctx.Done():
			return pos
		}
	}
	return pos
}

func resubscribe(ctx context.Context, store eventstore.Store, filter eventstore.Filter, pos eventstore.Position) eventstore.Subscription {
	for backoff := 100 * time.Millisecond; ; backoff = min(backoff*2, 5*time.Second) {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		if sub, err := store.Subscribe(ctx, pos, filter); err == nil {
			return sub
		}
	}
}
