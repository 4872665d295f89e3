package projections

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/switchyard/switchyard/eventstore"
)

// subscriber is the Watermill subscriber over the event store: the topic is a projector's
// name, and each message a batch of that projector's events after its checkpoint. A batch is
// redelivered until acknowledged, so the handler sees every event in order.
type subscriber struct {
	engine  *Engine
	closing chan struct{}
	// mu orders Subscribe's wg.Add before Close's wg.Wait: the router closes the subscriber
	// from a handler that has started while it may still be subscribing the others.
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

var _ message.Subscriber = (*subscriber)(nil)

func (s *subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	p, err := s.engine.Projector(topic)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(out)
		return out, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer cancel()
		go func() {
			select {
			case <-s.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		s.run(ctx, p, out)
	}()
	return out, nil
}

func (s *subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// run holds the projector's advisory lock while it feeds the projector, and waits for the
// lock again if it loses it.
func (s *subscriber) run(ctx context.Context, p Projector, out chan<- *message.Message) {
	log := s.engine.log.WithField("projector", p.Name())
	backoff := s.engine.opts.RetryBackoff
	for ctx.Err() == nil {
		err := s.withLock(ctx, p, func(lockCtx context.Context) error {
			log.Info("projector running")
			s.engine.metrics.running.WithLabelValues(p.Name()).Set(1)
			defer s.engine.metrics.running.WithLabelValues(p.Name()).Set(0)
			return s.feed(lockCtx, p, out)
		})
		var f *failure
		if errors.As(err, &f) {
			return // stopped on purpose; readiness is red until the projector is fixed
		}
		if err != nil && ctx.Err() == nil {
			log.WithError(err).Warn("projector interrupted; resuming")
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 10*time.Second)
		}
	}
}

// withLock runs fn while holding the projector's advisory lock (HoldLock).
func (s *subscriber) withLock(ctx context.Context, p Projector, fn func(context.Context) error) error {
	return HoldLock(ctx, s.engine.pool.Config().ConnConfig, "projector:"+p.Name(), fn)
}

// feed subscribes from the checkpoint and sends batches until ctx ends or the store fails.
func (s *subscriber) feed(ctx context.Context, p Projector, out chan<- *message.Message) error {
	cp, err := readCheckpoint(ctx, s.engine.pool, p.Name())
	if err != nil {
		return err
	}
	sub, err := s.engine.store.Subscribe(ctx, cp.Position, p.Filter())
	if err != nil {
		return err
	}
	defer sub.Close()
	idle := s.idleWatch(ctx, p, sub, cp.Position)
	var started time.Time
	for {
		batch, ok := collect(ctx, sub.Events(), s.engine.opts.BatchSize, started.Add(s.engine.opts.BatchInterval), sleep, idle)
		started = time.Now()
		if !ok {
			if err := sub.Err(); err != nil {
				return err
			}
			return ctx.Err()
		}
		if err := s.deliver(ctx, p, batch, out); err != nil {
			return err
		}
	}
}

// collect waits for one event (idle.next); when it comes before notBefore, it pauses until
// then, so that the events arriving meanwhile join its batch; then it takes whatever is ready,
// up to max. The pause does not wake for each event (the subscription's buffer holds them):
// under load that would be a wake-up per event and projector.
func collect(ctx context.Context, events <-chan eventstore.RecordedEvent, max int, notBefore time.Time,
	pause func(context.Context, time.Duration) bool, idle idleWatch) ([]eventstore.RecordedEvent, bool) {
	first, ok := idle.next(ctx, events)
	if !ok {
		return nil, false
	}
	batch := []eventstore.RecordedEvent{first}
	if wait := time.Until(notBefore); wait > 0 && max > 1 && !pause(ctx, wait) {
		return batch, true // ending: deliver fails on ctx
	}
	for len(batch) < max {
		select {
		case ev, ok := <-events:
			if !ok {
				return batch, true
			}
			batch = append(batch, ev)
		default:
			return batch, true
		}
	}
	return batch, true
}

// deliver sends one batch and waits for its ack, redelivering after a nack with backoff.
func (s *subscriber) deliver(ctx context.Context, p Projector, batch []eventstore.RecordedEvent, out chan<- *message.Message) error {
	backoff := s.engine.opts.RetryBackoff
	for attempt := 1; ; attempt++ {
		msg := withBatch(ctx, watermill.NewUUID(), batch)
		select {
		case out <- msg:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-msg.Acked():
			return nil
		case <-msg.Nacked():
		case <-ctx.Done():
			return ctx.Err()
		}
		if failed := s.failedPermanently(ctx, p); failed != nil {
			return failed
		}
		s.engine.metrics.retries.WithLabelValues(p.Name()).Inc()
		if attempt == failAfterRetries {
			s.engine.recordError(ctx, p.Name(), errors.New("batch keeps failing; retrying (see logs)"))
		}
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// failedPermanently returns a failure when the handler stopped the projector.
func (s *subscriber) failedPermanently(ctx context.Context, p Projector) error {
	cp, err := readCheckpoint(ctx, s.engine.pool, p.Name())
	if err != nil || cp.Error == "" {
		return nil
	}
	if s.engine.isFailed(p.Name()) {
		return &failure{errors.New(cp.Error)}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// idleWatch calls fn each time every passes while a projector waits for its next event.
type idleWatch struct {
	every time.Duration
	fn    func()
}

// next waits for the next event, calling w.fn each time w.every passes without one; false when
// events is closed or ctx ends.
func (w idleWatch) next(ctx context.Context, events <-chan eventstore.RecordedEvent) (eventstore.RecordedEvent, bool) {
	select {
	case ev, ok := <-events:
		return ev, ok
	default:
	}
	var tick <-chan time.Time
	if w.fn != nil && w.every > 0 {
		t := time.NewTicker(w.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev, ok := <-events:
			return ev, ok
		case <-tick:
			w.fn()
		case <-ctx.Done():
			return eventstore.RecordedEvent{}, false
		}
	}
}

// idleWatch is p's: while p waits, it records how far sub has read the log (advanceIdle), when
// sub can tell (eventstore.Progress). from is the checkpoint p was subscribed from.
func (s *subscriber) idleWatch(ctx context.Context, p Projector, sub eventstore.Subscription, from eventstore.Position) idleWatch {
	prog, ok := sub.(eventstore.Progress)
	if !ok || s.engine.opts.IdleCheckpointInterval < 0 {
		return idleWatch{}
	}
	var moved eventstore.Position // a from found moved, not tried again (with stale)
	stale := false
	return idleWatch{every: s.engine.opts.IdleCheckpointInterval, fn: func() {
		// Scanned first: the events it covers were sent before it was recorded, so with none
		// waiting they were all in batches this feed delivered, and acknowledged.
		to := prog.Scanned()
		if len(sub.Events()) > 0 {
			return // the next batch moves the checkpoint
		}
		if v, ok := s.engine.checkpoints.Load(p.Name()); ok {
			from = v.(eventstore.Position)
		}
		if !from.Less(to) || (stale && moved == from) {
			return
		}
		if s.engine.advanceIdle(ctx, p.Name(), from, to) {
			from = to
			return
		}
		// Moved by a rebuild or a reset: the next batch finds out where it is (applyMessage);
		// until then this feed does not know which events the tables hold.
		moved, stale = from, true
	}}
}
