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
	"github.com/switchyard/switchyard/reactors/bulks"
	"github.com/switchyard/switchyard/reactors/debounce"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/reactors/schedules"
	"github.com/switchyard/switchyard/reactors/webhooks"
	"github.com/switchyard/switchyard/reactors/windows"
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
		Concurrency: a.cfg.ExecutorConcurrency, WorkspaceShare: a.cfg.ExecutorShare, DrainTimeout: a.cfg.ShutdownTimeout, TaskLease: a.cfg.TaskLease, Now: a.now(),
		Registerer: a.registry, Logger: a.log, Sealer: a.sealer, ModuleCAs: a.cfg.WebhookCAs})
	// Submits accepted here hand their executions to exec while it runs (commands.Runner).
	cmds := commands.WithRunner(a.cmds, exec)
	// Triggers accepted here wake the scheduler (set below, before anything is served).
	var wake commands.RunWaker
	cmds = commands.WithRunWaker(cmds, func(st run.State, dispatched []run.Stage) { wake(st, dispatched) })
	// and have the hub track their records, so that their streams start from the commands'
	// cache instead of reading the run (httpapi's runFeed.fromCache).
	cmds = commands.WithRunAnnouncer(cmds, func(runID string) { hub.Expect(commands.RunStream(runID)) })
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
		HookRatePerSecond: a.cfg.HookRateLimit, HookBurst: a.cfg.HookRateBurst,
	})
	if err != nil {
		return err
	}
	// The stages sched dispatches run first in exec; a run's end wakes its streams at once.
	sched := scheduler.New(a.store, a.cmds, a.queries, scheduler.Config{Logger: a.log, Runner: exec, Now: a.now(),
		Ended: func(runID string) { notifyRunEnded(hub, a.cmds, runID) },
		Lock: func(ctx context.Context, fn func(context.Context) error) error {
			return projections.HoldLock(ctx, a.pool.Config().ConnConfig, "scheduler", fn)
		}})
	bulkWorker := bulks.New(a.store, a.cmds, a.queries, bulks.Config{Logger: a.log,
		Lock: func(ctx context.Context, fn func(context.Context) error) error {
			return projections.HoldLock(ctx, a.pool.Config().ConnConfig, "bulks", fn)
		}})
	// Schedules start their runs through cmds, so that sched starts each at once.
	fires := schedules.New(a.store, cmds, schedules.Config{Logger: a.log, Now: a.now(), ClockMoved: a.clockNudges(ctx),
		Lock: func(ctx context.Context, fn func(context.Context) error) error {
			return projections.HoldLock(ctx, a.pool.Config().ConnConfig, "schedules", fn)
		}})
	debouncer := debounce.New(a.store, cmds, a.queries, debounce.Config{Logger: a.log, Now: a.now(), After: a.after(),
		Lock: func(ctx context.Context, fn func(context.Context) error) error {
			return projections.HoldLock(ctx, a.pool.Config().ConnConfig, "debounce", fn)
		}})
	hooks := webhooks.New(a.store, a.cmds, a.queries, a.sealer, webhooks.Config{
		AllowPrivate: a.cfg.WebhookAllowPrivate, RootCAs: a.cfg.WebhookCAs, Logger: a.log, Now: a.now()})
	// Every instance learns the cache windows the others open, so their repeats are free here
	// at once (reactors/windows): from before it listens, so every window opened once this
	// instance answers is learned.
	if a.cfg.CacheWindow > 0 {
		fctx, stopFollower := context.WithCancel(ctx)
		defer stopFollower()
		follower := windows.New(a.store, a.cmds, windows.Config{Logger: a.log, Registerer: a.registry})
		if err := follower.Start(fctx); err != nil {
			return err
		}
	}
	wake = sched.Wake
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (SWITCHYARD_LISTEN): %w", a.cfg.Listen, err)
	}
	hs := newHTTPServer(srv.Handler(), a.cfg.ReadTimeout)
	// Streams taken over give their connections back here once they end (httpapi.ConnReturn).
	returns := httpapi.NewConnReturn(ln.Addr())
	returns.Attach(hs)
	g, gctx := errgroup.WithContext(ctx)
	// The projection engine outlives the reactors: it stops after their drain has been
	// projected (settleProjections), so a clean stop leaves no read model behind the log.
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	engineDone := make(chan error, 1)
	go func() { engineDone <- a.engine.Run(engineCtx) }()
	g.Go(func() error {
		select {
		case err := <-engineDone:
			engineDone <- err // for the read after g.Wait
			if err == nil {
				err = errors.New("stopped early")
			}
			return fmt.Errorf("projection engine: %w", err)
		case <-gctx.Done():
			return nil
		}
	})
	if !a.noExecutor {
		g.Go(func() error { return exec.Run(gctx) })
		g.Go(func() error { return sched.Run(gctx) })
		g.Go(func() error { return bulkWorker.Run(gctx) })
		g.Go(func() error { return fires.Run(gctx) })
		g.Go(func() error { return debouncer.Run(gctx) })
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
		if err := hs.Serve(returns); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve connections given back: %w", err)
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
	err = g.Wait()
	if err == nil {
		a.settleProjections()
	}
	stopEngine()
	if engErr := <-engineDone; err == nil && engErr != nil {
		err = fmt.Errorf("projection engine: %w", engErr)
	}
	return err
}

// settleProjections waits, at most the shutdown timeout, for the running projectors to apply
// the log as it stands after the drain.
func (a *app) settleProjections() {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	head, err := a.store.HeadPosition(ctx)
	if err == nil {
		err = a.engine.CatchUp(ctx, head)
	}
	if err != nil {
		a.log.WithError(err).Warn("read models not caught up at shutdown")
	}
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

// notifyRunEnded wakes a run's streams at its end, ahead of the log, handing them the ended
// state the scheduler's step left in the commands' cache so that they need not read the run
// back; with none cached it is a bare nudge, and the streams read the run.
func notifyRunEnded(hub *livehub.Hub, cmds *commands.Commands, runID string) {
	st, rev, ok := commands.EndedRun(cmds.Workflows, runID)
	if !ok {
		hub.Notify(commands.RunStream(runID))
		return
	}
	hub.NotifyEnded(commands.RunStream(runID), livehub.Ended{Revision: rev, State: st})
}
