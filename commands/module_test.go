package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
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
