package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/testenv"
)

// testCore is the in-process service behind the HTTP tests: a database with projections, a
// started live hub, the scheduler, and an executor when asked (startExecutor).
type testCore struct {
	env *testenv.Env
	hub *livehub.Hub
	log logrus.FieldLogger
	reg *modules.Registry
	// sealer seals callback and module secrets; the executor opens module secrets with it.
	sealer *seal.Sealer
}

func newTestCore(t testing.TB, withExecutor bool) testCore {
	t.Helper()
	env := testenv.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category, run.Category}}, log)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := testCore{env: env, hub: hub, log: log, reg: modules.Builtins(modules.BuiltinsConfig{})}
	sealKey, _ := seal.GenerateKey()
	sealer, err := seal.New(sealKey)
	if err != nil {
		t.Fatal(err)
	}
	c.sealer = sealer
	env.Cmds = commands.New(env.Store, commands.WithModules(c.reg), commands.WithSealer(sealer))
	testenv.Go(t, scheduler.New(env.Store, env.Cmds, env.Queries, scheduler.Config{SweepInterval: 100 * time.Millisecond,
		SweepGrace: 200 * time.Millisecond, Logger: log}).Run)
	if withExecutor {
		c.startExecutor(t)
	}
	return c
}

// startExecutor runs an executor on the core's database until the test ends; the submits of
// c.env.Cmds from now on are handed to it.
func (c testCore) startExecutor(t testing.TB) {
	ex := executor.New(c.env.Store, c.env.Cmds, projections.NewQueries(c.env.Pool), c.reg, c.hub, executor.Config{SweepInterval: 100 * time.Millisecond,
		SweepGrace: 100 * time.Millisecond, DrainTimeout: time.Second, Logger: c.log, Sealer: c.sealer})
	c.env.Cmds = commands.WithRunner(c.env.Cmds, ex)
	testenv.Go(t, ex.Run)
}
