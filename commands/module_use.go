package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/module"
	"github.com/switchyard/switchyard/modules"
)

// compiledSchemas is one version of a module's compiled schemas (Modules.Schemas).
type compiledSchemas struct {
	version int
	updated time.Time
	schemas *modules.Schemas
}

// moduleUse is what a submit or a workflow component needs of the module it names: a built-in,
// or one of the workspace's own.
type moduleUse struct {
	costMilli int64
	// transport is nil for a built-in, which the executor runs in-process.
	transport *execution.Transport
	// timeoutMs is a workspace module's attempt deadline; 0 for a built-in (its own applies).
	timeoutMs int64
	// cacheable says identical calls may be served from the cache window: always for a
	// built-in, only when a workspace module says so (user code may have side effects).
	cacheable bool
	builtin   modules.Module
	schemas   *modules.Schemas
}

// use resolves the module name for a workspace: a built-in first, else the workspace's live
// module. Neither is the built-ins' unknown-module error (a 400 on field "module").
func (h *Modules) use(ctx context.Context, workspaceID, name string) (moduleUse, error) {
	if m, ok := h.modules.Get(name); ok {
		return moduleUse{costMilli: m.CostMilli(), cacheable: true, builtin: m}, nil
	}
	m, err := h.live(ctx, workspaceID, name)
	if errors.Is(err, module.ErrNotFound) {
		return moduleUse{}, asDomainInvalid(modules.UnknownModule(name))
	}
	if err != nil {
		return moduleUse{}, err
	}
	s, err := h.Schemas(m)
	if err != nil {
		return moduleUse{}, err
	}
	return moduleUse{costMilli: int64(m.Price), transport: m.ExecutionTransport(), timeoutMs: m.TimeoutMs,
		cacheable: m.Cacheable, schemas: s}, nil
}

// moduleFreshFor bounds how stale a module a submit uses may be. Every call of a workspace
// module resolves it, and reading its stream each time cost a query per submit; a module read
// less than this long ago is used as read. The instance that registers, updates or deletes a
// module sees the change at once (remembered below); another instance within this bound.
const moduleFreshFor = time.Second

// freshModule is a module as read at a time; gone: deleted on this instance.
type freshModule struct {
	m    module.Module
	gone bool
	at   time.Time
}

// live is Get served from memory when the module was read less than moduleFreshFor ago.
func (h *Modules) live(ctx context.Context, workspaceID, name string) (module.Module, error) {
	key := ModuleStream(workspaceID, name)
	old, _ := h.fresh.Load(key)
	if f, ok := old.(*freshModule); ok && time.Since(f.at) < moduleFreshFor {
		if f.gone {
			return module.Module{}, fmt.Errorf("module %q: %w", name, module.ErrNotFound)
		}
		return f.m, nil
	}
	at := time.Now()
	m, err := h.Get(ctx, workspaceID, name)
	if err != nil {
		return m, err
	}
	// Only over the entry seen before the read: a change this instance made meanwhile wins.
	f := &freshModule{m: m, at: at}
	if old == nil {
		h.fresh.LoadOrStore(key, f)
	} else {
		h.fresh.CompareAndSwap(key, old, f)
	}
	return m, nil
}

// remember records a module this instance just changed, so its submits see the change at once.
func (h *Modules) remember(workspaceID, name string, m module.Module, gone bool) {
	h.fresh.Store(ModuleStream(workspaceID, name), &freshModule{m: m, gone: gone, at: time.Now()})
}

// validate checks a submit's config and input, with errors naming the field.
func (u moduleUse) validate(config, input json.RawMessage) error {
	if u.builtin != nil {
		return asDomainInvalid(u.builtin.Validate(config, input))
	}
	return asDomainInvalid(u.schemas.Validate(config, input))
}

// validateConfig checks a workflow component's config, with errors naming the field.
func (u moduleUse) validateConfig(config json.RawMessage) error {
	if u.builtin != nil {
		return asDomainInvalid(u.builtin.ValidateConfig(config))
	}
	return asDomainInvalid(u.schemas.ValidateConfig(config))
}

// stageTimeout is the attempt deadline of a stage: the component's timeoutMs, bounded by a
// workspace module's own.
func (u moduleUse) stageTimeout(componentMs int64) int64 {
	if u.timeoutMs > 0 && (componentMs <= 0 || componentMs > u.timeoutMs) {
		return u.timeoutMs
	}
	return componentMs
}

// moduleCheck is the workflow definitions' module check for a workspace: built-ins and the
// workspace's own modules.
func (h *Modules) moduleCheck(ctx context.Context, workspaceID string) func(string, json.RawMessage) error {
	return func(name string, config json.RawMessage) error {
		u, err := h.use(ctx, workspaceID, name)
		if err != nil {
			return err
		}
		return u.validateConfig(config)
	}
}

// price is what one call of name costs in the workspace (0 when it cannot be resolved): for
// the advisory balance check of a trigger. Each module is read once per check.
func (h *Modules) price(ctx context.Context, workspaceID string) func(string) int64 {
	prices := map[string]int64{}
	return func(name string) int64 {
		if p, ok := prices[name]; ok {
			return p
		}
		u, err := h.use(ctx, workspaceID, name)
		if err != nil {
			u.costMilli = 0
		}
		prices[name] = u.costMilli
		return u.costMilli
	}
}
