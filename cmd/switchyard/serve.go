package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/console"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/reactors/webhooks"
	"github.com/switchyard/switchyard/server"
)

func newServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP service, projections and reactors (migrates the schema first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tuneGC(os.Getenv)
			a, err := openServingApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			return a.serve(cmd.Context(), nil)
		},
	}
}

// serve runs until ctx ends, then drains: the listener stops accepting, in-flight requests get
// the shutdown timeout to finish, and the executor lets running modules end. ready, if set,
// receives the bound address once listening.
func (a *app) serve(ctx context.Context, ready chan<- string) error {
	hub := livehub.New(a.store, eventstore.Filter{Categories: []string{execution.Category, run.Category}}, a.log)
	if err := hub.Start(ctx); err != nil {
		return err
	}
	exec := executor.New(a.store, a.cmds, a.queries, a.modules, hub, executor.Config{
		Concurrency: a.cfg.ExecutorConcurrency, WorkspaceShare: a.cfg.ExecutorShare, DrainTimeout: a.cfg.ShutdownTimeout, TaskLease: a.cfg.TaskLease,
		Registerer: a.registry, Logger: a.log, Sealer: a.sealer, ModuleCAs: a.cfg.WebhookCAs})
	// Submits accepted here hand their executions to exec while it runs (commands.Runner).
	cmds := commands.WithRunner(a.cmds, exec)
	auth, err := a.sdkAuth(ctx)
	if err != nil {
		return err
	}
	idp, err := a.identityProvider(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped during start-up: a clean stop
		}
		return err
	}
	srv, err := server.Routes(server.RoutesConfig{
		Server: httpapi.ServerConfig{
			Logger:       a.log,
			Gatherer:     a.registry,
			MaxBodyBytes: a.cfg.MaxBodyBytes,
			Checks: []httpapi.Check{
				{Name: "database", Check: a.pool.Ping},
				{Name: "eventstore", Check: a.store.Ping},
				{Name: "projections", Check: a.engine.Ready},
			},
		},
		Cmds: cmds, Queries: a.queries, Registry: a.modules, Hub: hub, SDKAuth: auth, Identity: idp, Tasks: exec,
		Workers:     consoleWorkers(exec),
		CacheWindow: a.cfg.CacheWindow, Heartbeat: a.cfg.SSEHeartbeat,
	})
	if err != nil {
		return err
	}
	sched := scheduler.New(a.store, a.cmds, a.queries, scheduler.Config{Logger: a.log,
		Lock: func(ctx context.Context, fn func(context.Context) error) error {
			return projections.HoldLock(ctx, a.pool.Config().ConnConfig, "scheduler", fn)
		}})
	hooks := webhooks.New(a.store, a.cmds, a.queries, a.sealer, webhooks.Config{
		AllowPrivate: a.cfg.WebhookAllowPrivate, RootCAs: a.cfg.WebhookCAs, Logger: a.log})
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (SWITCHYARD_LISTEN): %w", a.cfg.Listen, err)
	}
	hs := newHTTPServer(srv.Handler(), a.cfg.ReadTimeout)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.engine.Run(gctx) })
	if !a.noExecutor {
		g.Go(func() error { return exec.Run(gctx) })
		g.Go(func() error { return sched.Run(gctx) })
	}
	g.Go(func() error { return idp.Run(gctx) })
	g.Go(func() error { return hooks.Run(gctx) })
	g.Go(func() error {
		a.log.WithField("addr", ln.Addr().String()).WithField("baseUrl", a.cfg.BaseURL).Info("switchyard listening")
		if ready != nil {
			ready <- ln.Addr().String()
		}
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		a.log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), a.cfg.ShutdownTimeout)
		defer cancel()
		return hs.Shutdown(sctx)
	})
	return g.Wait()
}

// consoleWorkers is the console's view of the workers exec's task board has seen.
func consoleWorkers(exec *executor.Executor) func(string) []console.Worker {
	return func(workspaceID string) []console.Worker {
		var out []console.Worker
		for _, w := range exec.Workers(workspaceID) {
			out = append(out, console.Worker{ID: w.WorkerID, Modules: w.Modules, InFlight: w.InFlight, LastPoll: w.LastPoll})
		}
		return out
	}
}
