package projections

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/eventstore"
)

// lockCheckInterval is how often a running projector confirms it still holds its lock's
// connection; a lost connection means another instance may take over.
const lockCheckInterval = 5 * time.Second

// subscriber is the Watermill subscriber over the event store: the topic is a projector's
// name, and each message a batch of that projector's events after its checkpoint. A batch is
// redelivered until acknowledged, so the handler sees every event in order.
type subscriber struct {
	engine    *Engine
	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

var _ message.Subscriber = (*subscriber)(nil)

func (s *subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	p, err := s.engine.Projector(topic)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
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
	s.closeOnce.Do(func() { close(s.closing) })
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

// HoldLock runs fn while holding the session advisory lock called name, waiting for it as long
// as ctx lasts: one process at a time, across every process on the database. The lock is taken
// on a dedicated connection outside the pool: a lock held for as long as a projector or the
// scheduler runs must not take a pooled connection, or enough holders would starve the pool
// that their own work draws from. fn's context ends if that connection stops answering, as it
// does when the database restarts; the lock is then free for another process.
func HoldLock(ctx context.Context, cfg *pgx.ConnConfig, name string, fn func(context.Context) error) error {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return err
	}
	// Closing the session releases the lock for sure, whatever state the connection is in.
	defer func() {
		closeCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		conn.Close(closeCtx)
	}()
	if err := waitForLock(ctx, conn, lockKey(name), lockRetryInterval); err != nil {
		return err
	}
	lockCtx, cancel := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watchLock(lockCtx, conn, cancel)
	}()
	err = fn(lockCtx)
	cancel()
	<-watchDone
	return err
}

// lockRetryInterval is how often a process waiting for a lock asks for it again: the most a
// standby's takeover lags behind the holder's end.
const lockRetryInterval = 500 * time.Millisecond

// waitForLock takes the session advisory lock key on conn, asking again every interval (with
// jitter, so that standbys do not ask in step) until it is granted or ctx ends. It never waits
// inside a statement: a backend blocked in pg_advisory_lock holds its statement's snapshot all
// the while, and with it the database's xmin horizon, so that no dead row version anywhere in
// the database could be pruned or vacuumed for as long as a standby instance waited. Hot rows
// (an account's stream row, its balance, the projection checkpoints) then grew HOT chains that
// every read walked, without end.
func waitForLock(ctx context.Context, conn *pgx.Conn, key int64, interval time.Duration) error {
	for {
		var got bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
			return err
		}
		if got {
			return nil
		}
		wait := time.NewTimer(interval/2 + rand.N(interval))
		select {
		case <-ctx.Done():
			wait.Stop()
			return ctx.Err()
		case <-wait.C:
		}
	}
}

func watchLock(ctx context.Context, conn *pgx.Conn, lost context.CancelFunc) {
	t := time.NewTicker(lockCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				lost()
				return
			}
		}
	}
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
	var started time.Time
	for {
		batch, ok := collect(ctx, sub.Events(), s.engine.opts.BatchSize, started.Add(s.engine.opts.BatchInterval), sleep)
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

// collect waits for one event; when it comes before notBefore, it pauses until then, so that
// the events arriving meanwhile join its batch; then it takes whatever is ready, up to max.
// The pause does not wake for each event (the subscription's buffer holds them): under load
// that would be a wake-up per event and projector.
func collect(ctx context.Context, events <-chan eventstore.RecordedEvent, max int, notBefore time.Time,
	pause func(context.Context, time.Duration) bool) ([]eventstore.RecordedEvent, bool) {
	var batch []eventstore.RecordedEvent
	select {
	case ev, ok := <-events:
		if !ok {
			return nil, false
		}
		batch = append(batch, ev)
	case <-ctx.Done():
		return nil, false
	}
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
