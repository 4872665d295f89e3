package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/config"
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
	cmds     *commands.Handler
	queries  *projections.Queries
	engine   *projections.Engine
	registry *prometheus.Registry
	modules  *modules.Registry
	sealer   *seal.Sealer
	// noExecutor serves without running executions (bench measures the submit path alone).
	noExecutor bool
}

// openApp loads configuration from the environment and connects everything; migrate creates
// or updates the schema first.
func openApp(ctx context.Context, migrate bool) (*app, error) {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return nil, err
	}
	return openAppWith(ctx, cfg, cfg.NewLogger(os.Stderr), migrate)
}

func openAppWith(ctx context.Context, cfg config.Config, log *logrus.Logger, migrate bool) (*app, error) {
	pool, err := newPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, log: log, pool: pool, registry: prometheus.NewRegistry()}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.open(ctx, migrate); err != nil {
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
		return fmt.Errorf("connect to PostgreSQL (DATABASE_URL): %w", err)
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
	a.modules = modules.Builtins(modules.BuiltinOptions{AllowPrivateNetworks: a.cfg.WebhookAllowPrivate})
	a.cmds = commands.New(store, commands.WithModules(a.modules))
	a.queries = projections.NewQueries(a.pool)
	if a.sealer, err = a.cfg.Sealer(a.log); err != nil {
		return fmt.Errorf("secret key: %w", err)
	}
	a.engine, err = projections.NewEngine(a.pool, store, projections.All(), projections.Options{Logger: a.log, Registerer: a.registry})
	return err
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
		s, err := kurrent.New(ctx, a.cfg.KurrentDBURL, kurrent.Options{})
		if err != nil {
			return nil, fmt.Errorf("connect to KurrentDB (KURRENTDB_URL): %w", err)
		}
		return s, nil
	default:
		s, err := postgres.New(ctx, a.pool, postgres.Options{Logger: a.log})
		if err != nil {
			return nil, fmt.Errorf("open event store: %w", err)
		}
		return s, nil
	}
}

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
