package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/kurrent"
	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/internal/replay"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/seal"
)

// app is the wired service: configuration, database, event store, commands and read side.
type app struct {
	cfg      config.Config
	log      *logrus.Logger
	pool     *pgxpool.Pool
	store    eventstore.Store
	cmds     *commands.Commands
	queries  *projections.Queries
	engine   *projections.Engine
	registry *prometheus.Registry
	modules  *modules.Registry
	sealer   *seal.Sealer
	// noExecutor serves without running executions (bench measures the submit path alone).
	noExecutor bool
	// serving: this process is `serve`, which reports a generated secret key at every start;
	// other commands mention it only when they generate it.
	serving bool
	// noSealer: the command needs no secret key, so none is read or generated.
	noSealer bool
	// clock is the test clock of a test build (testclock.go); nil, the wall clock, otherwise.
	clock *testClock
}

// appOptions say what a command needs of the app.
type appOptions struct {
	migrate  bool // create or update the schema first
	serving  bool // see app.serving
	noSealer bool // see app.noSealer
	clock    *testClock
}

// openApp loads configuration from the environment and connects everything; migrate creates
// or updates the schema first.
func openApp(ctx context.Context, migrate bool) (*app, error) {
	return openAppFor(ctx, appOptions{migrate: migrate})
}

// openServingApp is openApp for `serve`.
func openServingApp(ctx context.Context) (*app, error) {
	return openAppFor(ctx, appOptions{migrate: true, serving: true})
}

func openAppFor(ctx context.Context, opts appOptions) (*app, error) {
	cfg, err := config.FromEnvironment()
	if err != nil {
		return nil, err
	}
	if opts.clock, err = loadTestClock(os.Getenv, time.Now()); err != nil {
		return nil, err
	}
	return openAppWithOptions(ctx, cfg, cfg.NewLogger(os.Stderr), opts)
}

func openAppWithOptions(ctx context.Context, cfg config.Config, log *logrus.Logger, opts appOptions) (*app, error) {
	pool, err := newPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, log: log, pool: pool, registry: prometheus.NewRegistry(), serving: opts.serving, noSealer: opts.noSealer, clock: opts.clock}
	if a.clock != nil {
		log.WithField("testClock", a.clock.String()).Warn("TEST CLOCK: this is a test build running on a moved clock " +
			"(SWITCHYARD_TEST_CLOCK_*); never serve with it")
	}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.open(ctx, opts.migrate); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// defaultPoolSize is the pool size when DATABASE_URL sets no pool_max_conns: pgxpool's own
// default (the number of CPUs, at least 4) is far too few for concurrent requests, executions
// and projectors on a small machine.
const defaultPoolSize = 24

func newPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		pc.MaxConns = defaultPoolSize
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	return pool, nil
}

func (a *app) open(ctx context.Context, migrate bool) error {
	if err := a.pool.Ping(ctx); err != nil {
		return connectError(a.cfg, err)
	}
	if migrate {
		if err := a.migrate(ctx); err != nil {
			return err
		}
	}
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	a.store = store
	a.modules = modules.Builtins(modules.BuiltinsConfig{AllowPrivateNetworks: a.cfg.WebhookAllowPrivate})
	if !a.noSealer {
		if a.sealer, err = a.cfg.Sealer(a.keyLogger()); err != nil {
			return fmt.Errorf("secret key: %w", err)
		}
	}
	cmdOpts := []commands.Option{commands.WithModules(a.modules), commands.WithSealer(a.sealer), commands.WithBaseURL(a.cfg.BaseURL)}
	if a.clock != nil {
		cmdOpts = append(cmdOpts, commands.WithClock(a.clock.Now))
	}
	a.cmds = commands.New(store, cmdOpts...)
	a.queries = projections.NewQueries(a.pool)
	a.engine, err = projections.NewEngine(a.pool, store, projections.All(), projections.EngineConfig{Logger: a.log, Registerer: a.registry})
	return err
}

// connectError explains a failed connection, naming where the database URL came from.
func connectError(cfg config.Config, err error) error {
	if cfg.DatabaseURLFile != "" {
		return fmt.Errorf("connect to PostgreSQL at %s, this checkout's database (DATABASE_URL is unset; recorded in %s): "+
			"is its server running? (bash scripts/postgres.sh start starts a private cluster): %w",
			config.RedactDSN(cfg.DatabaseURL), cfg.DatabaseURLFile, err)
	}
	return fmt.Errorf("connect to PostgreSQL (DATABASE_URL): %w", err)
}

// keyLogger is the logger the secret key is loaded with. Generating a key always warns (once:
// the file exists afterwards); reusing the generated key warns at every start of serve, which is
// where an operator looks, and not on every CLI command.
func (a *app) keyLogger() logrus.FieldLogger {
	if a.serving || a.cfg.SecretKey != "" {
		return a.log
	}
	if _, err := os.Stat(filepath.Join(a.cfg.DataDir, seal.KeyFileName)); err != nil {
		return a.log // absent (or unreadable): loading generates it, or fails, and says so
	}
	quiet := logrus.New()
	quiet.SetOutput(a.log.Out)
	quiet.SetFormatter(a.log.Formatter)
	quiet.SetLevel(min(a.log.GetLevel(), logrus.ErrorLevel))
	return quiet
}

func (a *app) migrate(ctx context.Context) error {
	if a.cfg.EventStore == config.EventStorePostgres {
		if err := postgres.Migrate(ctx, a.pool); err != nil {
			return fmt.Errorf("migrate event store: %w", err)
		}
	}
	if err := projections.Migrate(ctx, a.pool, projections.All()); err != nil {
		return fmt.Errorf("migrate read models: %w", err)
	}
	if err := replay.Migrate(ctx, a.pool); err != nil {
		return fmt.Errorf("migrate replay guard: %w", err)
	}
	return nil
}

func (a *app) openStore(ctx context.Context) (eventstore.Store, error) {
	switch a.cfg.EventStore {
	case config.EventStoreKurrentDB:
		s, err := kurrent.New(ctx, a.cfg.KurrentDBURL, kurrent.Config{})
		if err != nil {
			return nil, fmt.Errorf("connect to KurrentDB (KURRENTDB_URL): %w", err)
		}
		return s, nil
	default:
		s, err := postgres.New(ctx, a.pool, postgres.Config{Logger: a.log, Registerer: a.registry, CheckPayload: checkPayload})
		if err != nil {
			return nil, fmt.Errorf("open event store: %w", err)
		}
		return s, nil
	}
}

// checkPayload is the event store's last check of what it writes: what domain.CheckStorableData
// refuses, no reader of the log could take back.
func checkPayload(raw []byte) error { return domain.CheckStorableData("payload", raw) }

// Close releases the store and the pool.
func (a *app) Close() {
	if a.store != nil {
		a.store.Close()
	}
	a.pool.Close()
}

// withApp opens the app for one command, runs fn and closes it.
func withApp(ctx context.Context, fn func(*app) error) error {
	a, err := openApp(ctx, false)
	if err != nil {
		return err
	}
	defer a.Close()
	return fn(a)
}

// now is the clock of the commands and reactors: the test clock's, nil (time.Now, the
// reactors' default) without one.
func (a *app) now() func() time.Time {
	if a.clock == nil {
		return nil
	}
	return a.clock.Now
}

// after waits on the clock of now(); nil (time.After) without a test clock.
func (a *app) after() func(time.Duration) <-chan time.Time {
	if a.clock == nil {
		return nil
	}
	return a.clock.After
}

// clockNudges ticks, until ctx ends, while a test clock runs faster than the wall (testClock's
// nudges); nil otherwise.
func (a *app) clockNudges(ctx context.Context) <-chan struct{} {
	if a.clock == nil {
		return nil
	}
	return a.clock.nudges(ctx)
}
