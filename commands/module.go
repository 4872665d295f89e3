package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/module"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
)

var moduleAgg = aggregate[module.Module]{evolve: module.Module.Evolve}

// ModuleStream is the stream of a workspace module: module-<workspaceId>.<name>. A name is
// unique in its workspace because it names the stream.
func ModuleStream(workspaceID, name string) string {
	return eventstore.StreamName(module.Category, workspaceID+"."+name)
}

// ModuleSecretAAD binds a module's sealed secret to the module: a sealed value copied into
// another module's event does not open.
func ModuleSecretAAD(workspaceID, name string) []byte {
	return []byte("moduleSecret\n" + workspaceID + "\n" + name)
}

// RegisterModule is the input of Register and Update: a module's settings as the caller sent
// them, secrets in the clear (the command seals them).
type RegisterModule struct {
	WorkspaceID  string
	Name         string
	Description  string
	InputSchema  json.RawMessage
	ConfigSchema json.RawMessage
	OutputSchema json.RawMessage
	// TimeoutMs is one attempt's deadline; 0: the default (60 s).
	TimeoutMs int64
	// Price is what one successful call costs; nil: the default (1 credit).
	Price       *billing.Credits
	Cacheable   bool
	Concurrency int
	Transport   ModuleTransport
	// By is the caller's rights in the workspace: only an owner sets allowPrivate.
	By access.Rights
}

// ModuleTransport is a module's transport as the caller sent it.
type ModuleTransport struct {
	Type string
	URL  string
	// Secret signs each HTTP request; on Update, empty keeps the module's secret.
	Secret       string
	AllowPrivate bool
}

// Register registers a module in an existing workspace; a name already registered there is
// domain.ErrConflict.
func (h *Modules) Register(ctx context.Context, c RegisterModule) (module.Module, error) {
	return h.save(ctx, c, func(m module.Module, cmd module.Register) ([]domain.Event, error) {
		return module.DecideRegister(m, cmd, h.now())
	})
}

// Update replaces a module's settings as a whole (a missing secret keeps the module's); an
// unknown module is module.ErrNotFound.
func (h *Modules) Update(ctx context.Context, c RegisterModule) (module.Module, error) {
	if err := module.CheckName(c.Name); err != nil {
		return module.Module{}, fmt.Errorf("module %q: %w", c.Name, module.ErrNotFound)
	}
	return h.save(ctx, c, func(m module.Module, cmd module.Register) ([]domain.Event, error) {
		return module.DecideUpdate(m, module.Update(cmd), h.now())
	})
}

func (h *Modules) save(ctx context.Context, c RegisterModule, decide func(module.Module, module.Register) ([]domain.Event, error)) (module.Module, error) {
	if err := module.CheckName(c.Name); err != nil {
		return module.Module{}, err
	}
	if _, err := h.workspaces.Workspace(ctx, c.WorkspaceID); err != nil {
		return module.Module{}, err
	}
	if _, err := modules.CompileSchemas(c.Name, c.ConfigSchema, c.InputSchema, c.OutputSchema); err != nil {
		return module.Module{}, asDomainInvalid(err)
	}
	cmd, err := h.moduleCommand(c)
	if err != nil {
		return module.Module{}, err
	}
	st, _, err := executeFold(ctx, h, ModuleStream(c.WorkspaceID, c.Name), moduleAgg, func(m module.Module) ([]domain.Event, error) {
		return decide(m, cmd)
	})
	if err != nil {
		return module.Module{}, wrap("module "+c.Name, err)
	}
	h.remember(c.WorkspaceID, c.Name, st, false)
	return st, nil
}

// moduleCommand turns the input into the domain's command, sealing the secret.
func (h *Modules) moduleCommand(c RegisterModule) (module.Register, error) {
	cmd := module.Register{WorkspaceID: c.WorkspaceID, Name: c.Name, Owner: c.By.Role == workspace.RoleOwner,
		Spec: module.Spec{Description: c.Description, InputSchema: c.InputSchema, ConfigSchema: c.ConfigSchema,
			OutputSchema: c.OutputSchema, TimeoutMs: c.TimeoutMs, Cacheable: c.Cacheable, Concurrency: c.Concurrency,
			Transport: execution.Transport{Type: c.Transport.Type, URL: c.Transport.URL, AllowPrivate: c.Transport.AllowPrivate}}}
	if c.Price != nil {
		cmd.Spec.Price, cmd.PriceSet = *c.Price, true
	}
	if c.Transport.Secret == "" {
		return cmd, nil
	}
	if err := module.CheckSecret(c.Transport.Secret); err != nil {
		return cmd, err
	}
	if h.sealer == nil {
		return cmd, errors.New("module: no sealer configured for module secrets")
	}
	sealed, err := h.sealer.Seal([]byte(c.Transport.Secret), ModuleSecretAAD(c.WorkspaceID, c.Name))
	if err != nil {
		return cmd, fmt.Errorf("module: seal secret: %w", err)
	}
	cmd.Spec.Transport.SealedSecret = sealed
	return cmd, nil
}

// Delete deletes a module: submits naming it are refused from now on, and its tasks in flight
// finish. An unknown module is module.ErrNotFound.
func (h *Modules) Delete(ctx context.Context, workspaceID, name string) error {
	if module.CheckName(name) != nil {
		return fmt.Errorf("module %q: %w", name, module.ErrNotFound)
	}
	_, err := execute(ctx, h, ModuleStream(workspaceID, name), moduleAgg, func(m module.Module) ([]domain.Event, error) {
		return module.DecideDelete(m, workspaceID, h.now())
	})
	if err == nil {
		h.remember(workspaceID, name, module.Module{}, true)
	}
	return wrap("delete module "+name, err)
}

// Get folds a workspace's module from the event store, so a module is usable the instant its
// registration was acknowledged; an unknown or deleted one is module.ErrNotFound.
func (h *Modules) Get(ctx context.Context, workspaceID, name string) (module.Module, error) {
	if module.CheckName(name) != nil {
		return module.Module{}, fmt.Errorf("module %q: %w", name, module.ErrNotFound)
	}
	l, err := load(ctx, h, ModuleStream(workspaceID, name), moduleAgg)
	if err != nil {
		return module.Module{}, err
	}
	if !l.state.Live() || l.state.WorkspaceID != workspaceID {
		return module.Module{}, fmt.Errorf("module %q: %w", name, module.ErrNotFound)
	}
	return l.state, nil
}

// Schemas are m's compiled schemas, compiled once per version of the module.
func (h *Modules) Schemas(m module.Module) (*modules.Schemas, error) {
	key := ModuleStream(m.WorkspaceID, m.Name)
	if c, ok := h.compiled.Load(key); ok {
		if cs := c.(compiledSchemas); cs.version == m.Version && cs.updated.Equal(m.UpdatedAt) {
			return cs.schemas, nil
		}
	}
	s, err := modules.CompileSchemas(m.Name, m.ConfigSchema, m.InputSchema, m.OutputSchema)
	if err != nil {
		return nil, asDomainInvalid(err)
	}
	h.compiled.Store(key, compiledSchemas{version: m.Version, updated: m.UpdatedAt, schemas: s})
	return s, nil
}

// asDomainInvalid turns a modules.ValidationError into the domain's, naming the same field.
func asDomainInvalid(err error) error {
	var ve *modules.ValidationError
	if errors.As(err, &ve) {
		return domain.Invalid(ve.Field, "%s", ve.Message)
	}
	return err
}
