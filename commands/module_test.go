package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/module"
	"github.com/switchyard/switchyard/testenv"
)

// TestModuleRegistrationsRaceForAName: of registrations of one name racing on separate
// handlers (as two instances would), one wins and the others are conflicts; the name is the
// workspace's alone.
func TestModuleRegistrationsRaceForAName(t *testing.T) {
	env := testenv.New(t)
	ws, other := env.Workspace(t, 0), env.Workspace(t, 0)
	ctx := context.Background()
	reg := func(h *commands.Commands, ws string) error {
		_, err := h.Modules.Register(ctx, commands.RegisterModule{WorkspaceID: ws, Name: "acme.race",
			Transport: commands.ModuleTransport{Type: execution.TransportWorker}, By: access.Rights{Role: "admin"}})
		return err
	}
	const racers = 6
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = reg(commands.New(env.Store), ws)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, domain.ErrConflict):
			t.Fatalf("a losing registration: %v, want a conflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d registrations won, want 1", won)
	}
	if err := reg(env.Cmds, other); err != nil {
		t.Fatalf("the same name in another workspace: %v", err)
	}
	if _, err := env.Cmds.Modules.Get(ctx, ws, "acme.nothing"); !errors.Is(err, module.ErrNotFound) {
		t.Fatalf("an unknown module: %v", err)
	}
	if _, err := env.Cmds.Modules.Get(ctx, ws, "../../etc"); !errors.Is(err, module.ErrNotFound) {
		t.Fatalf("a name that names no stream: %v", err)
	}
	// Schemas are compiled when saved: a broken one is refused naming its field.
	_, err := env.Cmds.Modules.Register(ctx, commands.RegisterModule{WorkspaceID: ws, Name: "acme.schema",
		ConfigSchema: json.RawMessage(`{"type": "object", "properties": {"x": {"type": "nonsense"}}}`),
		Transport:    commands.ModuleTransport{Type: execution.TransportWorker}})
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Field != "configSchema" {
		t.Fatalf("a schema that does not compile: %v", err)
	}
}

// TestModuleChangesReachSubmits: submits use a module from memory, yet the instance that
// updates or deletes it uses the change at once, and another instance within the bound.
func TestModuleChangesReachSubmits(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	ctx := context.Background()
	other := commands.New(env.Store)
	save := func(save func(context.Context, commands.RegisterModule) (module.Module, error), price int64) {
		t.Helper()
		p := billing.FromWhole(price)
		if _, err := save(ctx, commands.RegisterModule{WorkspaceID: ws, Name: "acme.priced", Price: &p,
			Transport: commands.ModuleTransport{Type: execution.TransportWorker}, By: access.Rights{Role: "admin"}}); err != nil {
			t.Fatal(err)
		}
	}
	submit := func(h *commands.Commands) (execution.State, error) {
		return h.Executions.SubmitExecution(ctx, commands.SubmitExecution{WorkspaceID: ws, Module: "acme.priced",
			Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1})
	}
	save(env.Cmds.Modules.Register, 1)
	for _, h := range []*commands.Commands{env.Cmds, other} {
		if st, err := submit(h); err != nil || st.CostMilli != 1000 {
			t.Fatalf("a submit: %d %v", st.CostMilli, err)
		}
	}
	save(env.Cmds.Modules.Update, 2)
	if st, err := submit(env.Cmds); err != nil || st.CostMilli != 2000 {
		t.Fatalf("a submit after the update on its instance: %d %v", st.CostMilli, err)
	}
	testenv.Eventually(t, 10*time.Second, "the update to reach the other instance", func() bool {
		st, err := submit(other)
		return err == nil && st.CostMilli == 2000
	})
	if err := env.Cmds.Modules.Delete(ctx, ws, "acme.priced"); err != nil {
		t.Fatal(err)
	}
	if _, err := submit(env.Cmds); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("a submit after the delete on its instance: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "the delete to reach the other instance", func() bool {
		_, err := submit(other)
		return errors.Is(err, domain.ErrInvalid)
	})
}
