package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/eventstore"
)

// ErrUnknownProjector is returned for a projector name the engine does not have.
var ErrUnknownProjector = errors.New("unknown projector")

// failAfterRetries is how many consecutive failed batches make a transient error visible as a
// failure in /readyz (the projector keeps retrying).
const failAfterRetries = 5

// EngineConfig tunes an Engine.
type EngineConfig struct {
	// Logger receives retried failures; default a logger at warning level.
	Logger logrus.FieldLogger
	// Registerer receives the engine's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// BatchSize bounds the events in one Watermill message (one transaction). Default 500.
	BatchSize int
	// RetryBackoff is the first wait before a failed batch is redelivered. Default 100ms.
	RetryBackoff time.Duration
	// BatchInterval is the least time from the start of one batch of a projector to the start
	// of its next. An event that finds the projector idle for that long is applied at once;
	// under load, the events arriving meanwhile join one batch, so a busy projector commits
	// fewer, bigger transactions (each batch pays a round trip, a checkpoint update and a
	// commit whatever its size). It bounds how far a busy read model lags the log. Default
	// 20ms; negative applies every batch as soon as its first event arrives.
	BatchInterval time.Duration
	// IdleCheckpointInterval is how long a projector waits with nothing to apply before it
	// records how far its subscription has read the log (when the event store can tell), and
	// again each time as long passes: a projector whose events are rare would otherwise keep
	// its checkpoint at its last event, and every later subscription, `projections status`
	// and shutdown's catch-up would read the log from there, however far back. Default 1s;
	// negative never.
	IdleCheckpointInterval time.Duration
}

// defaultIdleCheckpointInterval: a write a second at most per idle projector, and only while
// the log moves.
const defaultIdleCheckpointInterval = time.Second

// defaultBatchInterval: in `bench e2e` 20ms took about a tenth off the CPU per execution against
// none (docs/performance.md, round 10), while keeping read models within a few tens of
// milliseconds of the log under load.
const defaultBatchInterval = 20 * time.Millisecond

// maxBatchInterval keeps a read model from lagging the log by more than a second by design.
const maxBatchInterval = time.Second

// Engine runs projectors: one Watermill router, one handler per projector.
type Engine struct {
	pool       *pgxpool.Pool
	store      eventstore.Store
	projectors map[string]Projector
	order      []Projector
	opts       EngineConfig
	log        logrus.FieldLogger
	metrics    *metrics

	// checkpoints holds, by projector name, the checkpoint this process last committed
	// (eventstore.Position), from which applyAt sends a batch in one round trip.
	checkpoints sync.Map

	mu      sync.Mutex
	applied chan struct{} // closed and replaced whenever this process commits a batch
	router  *message.Router
	failed  map[string]bool
}

func (c *EngineConfig) setDefaults() {
	if c.Logger == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		c.Logger = l
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.BatchInterval == 0 {
		c.BatchInterval = defaultBatchInterval
	}
	if c.IdleCheckpointInterval == 0 {
		c.IdleCheckpointInterval = defaultIdleCheckpointInterval
	}
}

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default.
func (c EngineConfig) Validate() error {
	switch {
	case c.BatchSize < 0:
		return fmt.Errorf("projections: BatchSize %d: must be at least 1 (0 takes the default)", c.BatchSize)
	case c.RetryBackoff < 0:
		return fmt.Errorf("projections: RetryBackoff %v: must not be negative", c.RetryBackoff)
	case c.BatchInterval > maxBatchInterval:
		return fmt.Errorf("projections: BatchInterval %v: must be at most %v", c.BatchInterval, maxBatchInterval)
	}
	return nil
}

// NewEngine builds an engine over the given projectors.
func NewEngine(pool *pgxpool.Pool, store eventstore.Store, projectors []Projector, opts EngineConfig) (*Engine, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{pool: pool, store: store, projectors: map[string]Projector{}, opts: opts,
		log: opts.Logger.WithField("component", "projections"), metrics: newMetrics(opts.Registerer), applied: make(chan struct{}), failed: map[string]bool{}}
	for _, p := range projectors {
		if _, dup := e.projectors[p.Name()]; dup {
			return nil, fmt.Errorf("projector %s registered twice", p.Name())
		}
		e.projectors[p.Name()] = p
		e.order = append(e.order, p)
	}
	return e, nil
}

// Projectors lists the engine's projectors in registration order.
func (e *Engine) Projectors() []Projector { return append([]Projector(nil), e.order...) }

// Projector returns the projector called name.
func (e *Engine) Projector(name string) (Projector, error) {
	p, ok := e.projectors[name]
	if !ok {
		return nil, fmt.Errorf("%q: %w", name, ErrUnknownProjector)
	}
	return p, nil
}

// Run runs every projector until ctx ends. Each projector runs in at most one process at a
// time; in the others its handler waits for the advisory lock.
func (e *Engine) Run(ctx context.Context) error {
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermillLogger{e.log})
	if err != nil {
		return fmt.Errorf("projection router: %w", err)
	}
	sub := &subscriber{engine: e, closing: make(chan struct{})}
	for _, p := range e.order {
		router.AddConsumerHandler(p.Name(), p.Name(), sub, e.handler(p))
	}
	e.mu.Lock()
	e.router = router
	e.mu.Unlock()
	go func() {
		<-ctx.Done()
		router.Close()
	}()
	if err := router.Run(ctx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("projection router: %w", err)
	}
	return nil
}

// Running is closed once the router runs.
func (e *Engine) Running(ctx context.Context) error {
	for {
		e.mu.Lock()
		r := e.router
		e.mu.Unlock()
		if r != nil {
			select {
			case <-r.Running():
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// handler applies one Watermill message (a batch) in one transaction with the checkpoint.
func (e *Engine) handler(p Projector) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		events, err := batchOf(msg)
		if err != nil {
			return e.fail(msg.Context(), p, err)
		}
		start := time.Now()
		err = e.applyMessage(msg.Context(), p, events)
		if err != nil {
			if errors.Is(err, ErrDecode) {
				return e.fail(msg.Context(), p, err)
			}
			return err
		}
		e.observe(p.Name(), events, time.Since(start))
		return nil
	}
}

// applyMessage applies a batch and moves the projector's checkpoint past it, in one transaction.
// When this process committed the projector's last batch, it knows the checkpoint and sends the
// whole transaction in one round trip (applyAt); otherwise, or when the checkpoint has moved
// since, in three: begin with the checkpoint's lock, the writes with the new checkpoint, commit
// (more when the projector reads in between).
func (e *Engine) applyMessage(ctx context.Context, p Projector, events []eventstore.RecordedEvent) error {
	if cp, ok := e.checkpoints.Load(p.Name()); ok {
		err := e.applyAt(ctx, p, events, cp.(eventstore.Position))
		if err == nil {
			return nil
		}
		e.checkpoints.Delete(p.Name())
		if !checkpointMoved(err) {
			return err
		}
	}
	tx, cp, err := e.beginBatch(ctx, p.Name())
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	ptx := newTx(tx)
	n, last, err := queueBatch(ctx, ptx, p, events, cp)
	if err != nil {
		return err
	}
	if n > 0 {
		ptx.Exec(saveCheckpointSQL, p.Name(), int64(last.Position.Commit), int64(last.Position.Prepare), n, last.CreatedAt)
		cp = last.Position
	}
	if err := ptx.Flush(ctx); err != nil {
		return fmt.Errorf("projector %s: %w", p.Name(), err)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	e.checkpoints.Store(p.Name(), cp)
	return nil
}

// applyAt applies a batch as applyMessage does, given the checkpoint this process last
// committed, in one round trip: begin, projection_advance (which locks the checkpoint and
// raises codeCheckpointMoved unless it is still at cp), the writes and commit are pipelined.
// A failed statement makes the server skip the rest, commit included, so nothing of a failed
// batch is written.
func (e *Engine) applyAt(ctx context.Context, p Projector, events []eventstore.RecordedEvent, cp eventstore.Position) error {
	n, last := freshAfter(events, cp)
	if n == 0 {
		return nil
	}
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("projector %s: %w", p.Name(), err)
	}
	defer conn.Release()
	ptx := newTx(conn)
	ptx.Exec(`BEGIN`)
	ptx.Exec(`SET LOCAL synchronous_commit = off`)
	ptx.Exec(advanceSQL, p.Name(), int64(cp.Commit), int64(cp.Prepare),
		int64(last.Position.Commit), int64(last.Position.Prepare), n, last.CreatedAt)
	_, _, err = queueBatch(ctx, ptx, p, events, cp)
	if err == nil {
		ptx.Exec(`COMMIT`)
		if err = ptx.Flush(ctx); err != nil {
			err = fmt.Errorf("projector %s: %w", p.Name(), err)
		}
	}
	if err != nil {
		// Whatever was sent is rolled back; a connection left inside a transaction is
		// destroyed by the pool on release.
		conn.Exec(context.WithoutCancel(ctx), `ROLLBACK`) //nolint:errcheck // best effort, see above
		return err
	}
	e.checkpoints.Store(p.Name(), last.Position)
	return nil
}

// advanceIdleSQL moves checkpoint $1 from ($2, $3), where this process left it, to ($4, $5),
// which its subscription has read up to finding nothing of the projector's.
const advanceIdleSQL = `UPDATE projection_checkpoints SET commit_pos = $4, prepare_pos = $5, updated_at = now()
	WHERE name = $1 AND commit_pos = $2 AND prepare_pos = $3`

// advanceIdle moves projector name's checkpoint from to to, where nothing of its lies between,
// and reports whether it did: when the checkpoint is no longer at from (a rebuild, a reset or
// another instance moved it) it writes nothing, and the next batch finds out as always.
func (e *Engine) advanceIdle(ctx context.Context, name string, from, to eventstore.Position) bool {
	tag, err := e.pool.Exec(ctx, advanceIdleSQL, name, int64(from.Commit), int64(from.Prepare), int64(to.Commit), int64(to.Prepare))
	if err != nil || tag.RowsAffected() != 1 {
		if err != nil && ctx.Err() == nil {
			e.log.WithError(err).WithField("projector", name).Debug("idle checkpoint not recorded")
		}
		return false
	}
	e.checkpoints.Store(name, to)
	return true
}

// advanceSQL calls projection_advance (schema.go).
const advanceSQL = `SELECT projection_advance($1, $2, $3, $4, $5, $6, $7)`

// checkpointMoved reports whether err is projection_advance finding the checkpoint moved.
func checkpointMoved(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeCheckpointMoved
}

// freshAfter counts the events after cp, which a batch applies, and returns the last of them.
func freshAfter(events []eventstore.RecordedEvent, cp eventstore.Position) (int, eventstore.RecordedEvent) {
	n, last := 0, eventstore.RecordedEvent{}
	for _, ev := range events {
		if cp.Less(ev.Position) {
			n, last = n+1, ev
		}
	}
	return n, last
}

// beginBatch opens a projector's batch transaction and locks its checkpoint, in one round trip.
// Read models are rebuilt from the durable log, and a batch commits with its checkpoint: losing
// the last batches in a crash only means applying them again, so they need not wait for the WAL
// to reach disk.
func (e *Engine) beginBatch(ctx context.Context, name string) (pgx.Tx, eventstore.Position, error) {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`SET LOCAL synchronous_commit = off`)
	b.Queue(lockCheckpointSQL, name)
	br := e.pool.SendBatch(ctx, b)
	tx := br.Tx()
	var c, pp int64
	err := execAll(br, 2)
	if err == nil {
		err = br.QueryRow().Scan(&c, &pp)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == pgx.ErrNoRows { // a projector's first batch: its checkpoint row is created and locked
		var cp eventstore.Position
		if cp, err = lockCheckpoint(ctx, tx, name); err == nil {
			return tx, cp, nil
		}
	}
	if err != nil {
		if tx != nil {
			tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the error below is the one that matters
		}
		return nil, eventstore.Position{}, fmt.Errorf("lock checkpoint %s: %w", name, err)
	}
	return tx, eventstore.Position{Commit: uint64(c), Prepare: uint64(pp)}, nil
}

// execAll reads the results of the next n statements of br, which return nothing of interest.
func execAll(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// applyEvents applies the events after position `after` one by one through Apply, returning how
// many and the last one.
func applyEvents(ctx context.Context, tx pgx.Tx, p Projector, events []eventstore.RecordedEvent, after eventstore.Position) (int, eventstore.RecordedEvent, error) {
	return applyBatch(ctx, tx, oneByOne{p}, events, after)
}

// oneByOne hides a projector's ApplyBatch, if it has one.
type oneByOne struct{ Projector }

func (e *Engine) observe(name string, events []eventstore.RecordedEvent, took time.Duration) {
	now := time.Now()
	e.metrics.applied.WithLabelValues(name).Add(float64(len(events)))
	e.metrics.batches.WithLabelValues(name).Inc()
	e.metrics.batchTime.WithLabelValues(name).Observe(took.Seconds())
	if len(events) > 0 {
		last := events[len(events)-1]
		e.metrics.delay.WithLabelValues(name).Observe(now.Sub(last.CreatedAt).Seconds())
		e.metrics.lastEvent.WithLabelValues(name).Set(float64(last.CreatedAt.UnixNano()) / 1e9)
	}
	e.mu.Lock()
	close(e.applied)
	e.applied = make(chan struct{})
	e.mu.Unlock()
}

// failure marks a projector's error as permanent: its subscriber stops redelivering.
type failure struct{ err error }

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// fail records a projector's error where every instance's readiness check sees it, and stops
// the projector: skipping an event it cannot decode would silently corrupt its read model.
func (e *Engine) fail(ctx context.Context, p Projector, err error) error {
	e.log.WithField("projector", p.Name()).WithError(err).Error("projector stopped on an event it cannot apply")
	e.metrics.failed.WithLabelValues(p.Name()).Set(1)
	e.mu.Lock()
	e.failed[p.Name()] = true
	e.mu.Unlock()
	e.recordError(ctx, p.Name(), err)
	return &failure{err}
}

func (e *Engine) recordError(ctx context.Context, name string, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, dbErr := e.pool.Exec(ctx, `UPDATE projection_checkpoints SET error = $2, updated_at = now() WHERE name = $1`, name, err.Error()); dbErr != nil {
		e.log.WithField("projector", name).WithError(dbErr).Error("cannot record projector error")
	}
}

func (e *Engine) isFailed(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed[name]
}

// Ready reports an error until this instance's router runs, and when a projector has failed,
// on this instance or any other. (With several instances each projector runs in one of them;
// the others stand by for its lock, which is ready too.)
func (e *Engine) Ready(ctx context.Context) error {
	e.mu.Lock()
	r := e.router
	e.mu.Unlock()
	if r == nil {
		return errors.New("projections are not running")
	}
	select {
	case <-r.Running():
	default:
		return errors.New("projections are starting")
	}
	rows, err := e.pool.Query(ctx, `SELECT name, error FROM projection_checkpoints WHERE error IS NOT NULL ORDER BY name`)
	if err != nil {
		return fmt.Errorf("read projector state: %w", err)
	}
	defer rows.Close()
	var failed []string
	for rows.Next() {
		var name, msg string
		if err := rows.Scan(&name, &msg); err != nil {
			return err
		}
		if _, ours := e.projectors[name]; ours {
			failed = append(failed, name+": "+msg)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("projectors failed: %v", failed)
	}
	return nil
}

// WaitFor blocks until projector name has applied the event at pos (read-your-writes), or ctx
// ends. It notices batches committed by this process at once and by other processes by polling.
func (e *Engine) WaitFor(ctx context.Context, name string, pos eventstore.Position) error {
	for {
		e.mu.Lock()
		applied := e.applied
		e.mu.Unlock()
		cp, err := readCheckpoint(ctx, e.pool, name)
		if err != nil {
			return err
		}
		if !cp.Position.Less(pos) {
			return nil
		}
		select {
		case <-applied:
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("wait for projector %s to reach %s: %w", name, pos, ctx.Err())
		}
	}
}
