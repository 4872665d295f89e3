package kurrent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/switchyard/switchyard/eventstore"
)

// Subscribe delivers every event strictly after from that matches filter, in position order: a
// catch-up SubscribeToAll that turns live once it has caught up.
//
// The server filters by stream-name prefix or event type (see subscriptionFilter); the rest of the
// filter, the store prefix and the exclusion of system events are checked on the client. If the
// subscription drops for a transient reason (connection loss, leader change, server restart) it is
// re-established from the last event it received, so no event is skipped and none is delivered twice;
// after Config.MaxResubscribeAttempts failures in a row it ends and Err reports the cause.
//
// Events is closed when the subscription ends. Err is then nil after Close or cancellation of ctx,
// eventstore.ErrClosed when the store was closed, and the failure otherwise.
func (s *Store) Subscribe(ctx context.Context, from eventstore.Position, filter eventstore.Filter) (eventstore.Subscription, error) {
	subCtx, cancel := context.WithCancel(ctx)
	c, opCtx, end, err := s.op(subCtx)
	if err != nil {
		cancel()
		return nil, err
	}
	sf := subscriptionFilter(s.prefix, filter)
	inner, err := subscribeAll(opCtx, c, from, sf)
	if err != nil {
		err = s.fail(opCtx, c, "subscribe to $all", err)
		end()
		cancel()
		return nil, err
	}
	sub := &subscription{
		events: make(chan eventstore.RecordedEvent, s.buffer),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	f := &feed{store: s, ctx: opCtx, parent: ctx, client: c, filter: filter, server: sf, last: from, sub: sub}
	go func() {
		defer close(sub.done)
		defer end()
		sub.finish(f.run(inner))
	}()
	return sub, nil
}

func subscribeAll(ctx context.Context, c *esdb.Client, from eventstore.Position, sf *esdb.SubscriptionFilter) (*esdb.Subscription, error) {
	return c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: allFrom(from), Filter: sf})
}

var errDropped = errors.New("subscription dropped by the server")

// subscription is the handle returned by Subscribe.
type subscription struct {
	events     chan eventstore.RecordedEvent
	cancel     context.CancelFunc
	done       chan struct{}
	userClosed atomic.Bool

	mu  sync.Mutex
	err error
}

func (s *subscription) Events() <-chan eventstore.RecordedEvent { return s.events }

func (s *subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription and waits until Events is closed.
func (s *subscription) Close() {
	s.userClosed.Store(true)
	s.cancel()
	<-s.done
}

func (s *subscription) finish(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	close(s.events)
}

// feed is the goroutine side of a subscription.
type feed struct {
	store  *Store
	ctx    context.Context // the operation's: cancelled by Close of either, or by parent
	parent context.Context // the caller's
	client *esdb.Client
	filter eventstore.Filter
	server *esdb.SubscriptionFilter
	last   eventstore.Position // the last event received (delivered or filtered out)
	sub    *subscription
}

// run pumps inner, resubscribing after transient drops, and returns the subscription's final error.
func (f *feed) run(inner *esdb.Subscription) error {
	failures := 0
	for {
		progressed, err := f.pump(inner)
		inner.Close()
		if f.ctx.Err() != nil {
			return f.stopReason()
		}
		if progressed {
			failures = 0
		}
		for {
			failures++
			if !retryable(err) || failures > f.store.resubscribe {
				return fmt.Errorf("kurrent: subscription to $all dropped: %w", err)
			}
			if !f.sleep(backoff(failures)) {
				return f.stopReason()
			}
			if isCode(err, esdb.ErrorCodeConnectionClosed) {
				f.store.renew(f.client)
			}
			f.client = f.store.currentClient()
			inner, err = subscribeAll(f.ctx, f.client, f.last, f.server)
			if err == nil {
				break
			}
			if f.ctx.Err() != nil {
				return f.stopReason()
			}
		}
	}
}

// pump delivers the events of inner until it drops or the subscription ends. progressed reports
// whether the server sent anything, which resets the count of failed attempts.
func (f *feed) pump(inner *esdb.Subscription) (progressed bool, err error) {
	for {
		msg := inner.Recv()
		switch {
		case msg.SubscriptionDropped != nil:
			if msg.SubscriptionDropped.Error == nil {
				return progressed, errDropped
			}
			return progressed, msg.SubscriptionDropped.Error
		case msg.EventAppeared != nil:
			progressed = true
			ev := original(msg.EventAppeared)
			if ev == nil {
				continue
			}
			pos := toPosition(ev.Position)
			if !after(f.last, pos) {
				continue // already delivered (the server's start position is exclusive; kept as a guard)
			}
			f.last = pos
			rec, ok := decodeAll(f.store.prefix, ev)
			if !ok || !f.filter.Matches(rec) {
				continue
			}
			select {
			case f.sub.events <- rec:
			case <-f.ctx.Done():
				return progressed, nil
			}
		default: // checkpoints, caught up, fell behind
			progressed = true
		}
	}
}

// stopReason is the subscription's error once its context is done.
func (f *feed) stopReason() error {
	if f.sub.userClosed.Load() || f.parent.Err() != nil || !f.store.isClosed() {
		return nil
	}
	return eventstore.ErrClosed
}

func (f *feed) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// backoff is the wait before the n-th consecutive resubscription attempt: 100ms doubling up to 5s.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}
