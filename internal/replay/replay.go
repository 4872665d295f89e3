// Package replay remembers accepted SDK request signatures in PostgreSQL, so that a signed
// request accepted by one serve process is refused as a replay by every other one. It implements
// httpapi.ReplayGuard; it is no projection (nothing in it comes from the event log). It keeps
// the SHA-256 of each signature as a claim in the Postgres event store's claims table
// (eventstore/postgres.ClaimsTable), which a submit may also take in the commit that records it:
// a signature taken on either path is taken for both. Its rows are worthless after a few
// minutes, so the table is UNLOGGED: a crash empties it, which can only re-admit requests whose
// timestamps are about to leave the skew window anyway.
package replay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/eventstore/postgres"
)

// Migrate creates the claims table (idempotent) and moves in the signatures of the table that
// held them before it, so that an upgrade re-admits none of them.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := postgres.MigrateClaims(ctx, pool); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	_, err := pool.Exec(ctx, `DO $$ BEGIN
	IF to_regclass('sdk_signatures') IS NOT NULL THEN
		INSERT INTO `+postgres.ClaimsTable+` (key, owner, expires_at)
			SELECT sig, ''::bytea, expires_at FROM sdk_signatures ON CONFLICT (key) DO NOTHING;
		DROP TABLE sdk_signatures;
	END IF;
	END $$`)
	if err != nil {
		return fmt.Errorf("replay: move sdk_signatures into %s: %w", postgres.ClaimsTable, err)
	}
	return nil
}

// Config configures a Postgres guard. Zero values take the defaults noted.
type Config struct {
	// Now is the clock (time.Now).
	Now func() time.Time
	// PurgeEvery is how often expired rows are deleted (5 s).
	PurgeEvery time.Duration
	// PurgeBatch bounds the rows one purge deletes (10000), so the request that happens to run
	// it is delayed by a bounded amount; a full batch makes the next request purge again.
	PurgeBatch int
	// Concurrency bounds the statements of Seen in flight at once (2); calls that arrive while
	// all are busy wait and share the next one.
	Concurrency int
	// Logger receives purge failures, which never fail a request.
	Logger logrus.FieldLogger
}

// Postgres is a ReplayGuard shared by every process on one database.
type Postgres struct {
	pool      *pgxpool.Pool
	opts      Config
	batches   *batcher
	nextPurge atomic.Int64 // Unix nanoseconds
	purging   atomic.Bool
}

// setDefaults fills zero values and repairs negative ones with the default, so that New,
// which returns no error, always gets a valid Config.
func (c *Config) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PurgeEvery <= 0 {
		c.PurgeEvery = 5 * time.Second
	}
	if c.PurgeBatch <= 0 {
		c.PurgeBatch = 10_000
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 2
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
}

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default.
func (c Config) Validate() error {
	switch {
	case c.PurgeEvery < 0:
		return fmt.Errorf("replay: PurgeEvery %v: must not be negative", c.PurgeEvery)
	case c.PurgeBatch < 0:
		return fmt.Errorf("replay: PurgeBatch %d: must be at least 1 (0 takes the default)", c.PurgeBatch)
	case c.Concurrency < 0:
		return fmt.Errorf("replay: Concurrency %d: must be at least 1 (0 takes the default)", c.Concurrency)
	}
	return nil
}

// New returns a guard on pool; the table must exist (Migrate). It calls cfg.setDefaults, which
// repairs what Validate would refuse, so it needs no error result.
func New(pool *pgxpool.Pool, cfg Config) *Postgres {
	cfg.setDefaults()
	return &Postgres{pool: pool, opts: cfg, batches: &batcher{pool: pool, max: cfg.Concurrency}}
}

// Seen implements httpapi.ReplayGuard. The insert claims the signature unless a live row holds
// it; an expired row not purged yet is taken over, as if it had been deleted. Only the SHA-256
// of the signature is stored. Concurrent calls share one statement (batch.go).
func (g *Postgres) Seen(ctx context.Context, sig []byte, until time.Time) (bool, error) {
	var owner [16]byte
	if _, err := rand.Read(owner[:]); err != nil {
		return false, fmt.Errorf("replay guard: %w", err)
	}
	return g.Take(ctx, sig, owner[:], until)
}

// Take implements httpapi.OwnedReplayGuard: Seen under owner, which may take the signature
// again (its submit may have taken it already, in the commit that recorded it).
func (g *Postgres) Take(ctx context.Context, sig, owner []byte, until time.Time) (bool, error) {
	now := g.opts.Now()
	seen, err := g.batches.seen(ctx, sha256.Sum256(sig), owner, until, now)
	if err != nil {
		return false, fmt.Errorf("replay guard: %w", err)
	}
	g.maybePurge(ctx, now)
	return seen, nil
}

// maybePurge deletes a batch of expired rows when one is due and no other request of this
// process is already doing it.
func (g *Postgres) maybePurge(ctx context.Context, now time.Time) {
	if now.UnixNano() < g.nextPurge.Load() || !g.purging.CompareAndSwap(false, true) {
		return
	}
	defer g.purging.Store(false)
	n, err := g.purge(ctx, now)
	next := now.Add(g.opts.PurgeEvery)
	if err != nil {
		g.opts.Logger.WithError(err).Warn("replay guard: purge expired signatures")
	} else if n >= int64(g.opts.PurgeBatch) {
		next = now // more to delete: the next request carries on
	}
	g.nextPurge.Store(next.UnixNano())
}

// Purge deletes up to one batch of expired rows now and reports how many went.
func (g *Postgres) Purge(ctx context.Context) (int64, error) { return g.purge(ctx, g.opts.Now()) }

func (g *Postgres) purge(ctx context.Context, now time.Time) (int64, error) {
	tag, err := g.pool.Exec(ctx, `DELETE FROM `+postgres.ClaimsTable+` WHERE key IN (
		SELECT key FROM `+postgres.ClaimsTable+` WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, g.opts.PurgeBatch)
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", postgres.ClaimsTable, err)
	}
	return tag.RowsAffected(), nil
}
