// Package commands carries out Switchyard's commands: each handler loads an aggregate from its
// stream, asks the domain to decide, and appends the resulting events at the revision it read.
// Nothing else writes state.
//
// There is one handler type per noun (Executions, Attempts, Charges, Webhooks, Billing,
// Workflows, Bulks, Hooks, Schedules, Events, Workspaces, Modules, Identity, Apps), each over the same small core: the event store, the
// clock, the state cache, and load/execute (aggregate.go), which load, decide and append with
// expectations, retrying on conflict. Commands holds one of each for the wiring.
package commands

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/seal"
)

// maxConflictRetries bounds how often a command reloads and decides again after another writer
// appended to the same stream first.
const maxConflictRetries = 20

// stateCacheSize is how many states a process keeps (stateCaches), and windowCacheSize how many
// cache windows beside them (a few hundred bytes each: some 20 MB when full).
const (
	stateCacheSize  = 4096
	windowCacheSize = 65536
)

// core is what every noun handler shares: one event store, one clock and one state cache per
// process. Each handler embeds it; load, execute and their kin take any handler (handler).
type core struct {
	store eventstore.Store
	now   func() time.Time
	cache *stateCaches
	// modules validates workflow components and submits and prices their runs.
	modules *modules.Registry
	// sealer seals the callback secrets of submits.
	sealer *seal.Sealer
	// baseURL is where the service is reached from outside (SWITCHYARD_BASE_URL): approval
	// URLs start with it.
	baseURL string
}

// handler is a noun handler: anything that embeds the core.
type handler interface{ base() *core }

func (c *core) base() *core { return c }

// Commands is every noun handler of one process, over one core. It only wires: each layer
// above calls the handler of the noun it acts on.
type Commands struct {
	// Executions accepts submits and reads executions.
	Executions *Executions
	// Windows learns the cache windows other processes open, from the log.
	Windows *Windows
	// Attempts claims executions' attempts and records their outcomes (the executor's).
	Attempts *Attempts
	// Charges bills finishing executions with their outcomes, in batches.
	Charges *Charges
	// Webhooks records the delivery of executions' terminal webhooks.
	Webhooks *Webhooks
	// Billing holds workspaces' accounts: top-ups, plans, charges, balances.
	Billing *Billing
	// Workflows holds workflow definitions and their runs.
	Workflows *Workflows
	// RunQueues holds the concurrency queues of runs: slots freed and runs admitted.
	RunQueues *RunQueues
	// Bulks holds bulk actions on runs of a workflow.
	Bulks *Bulks
	// Hooks holds the inbound webhooks of ON_WEBHOOK components and receives their deliveries.
	Hooks *Hooks
	// Schedules holds workflows' schedules: pause, resume, trigger, and their fires.
	Schedules *Schedules
	// Events takes events sent to workflows' ON_EVENT triggers and flushes debounce windows.
	Events *Events
	// Workspaces holds workspaces, members, access, API keys and MCP tokens.
	Workspaces *Workspaces
	// Modules holds workspace modules: the workspace's own code, run by workers or endpoints.
	Modules *Modules
	// Identity holds users, sessions and signing keys.
	Identity *Identity
	// Apps holds OAuth apps and the authorizations users give them.
	Apps *Apps
	// Waits holds what ends runs' waits: signals and approvals.
	Waits *Waits

	core *core
}

// Option configures New.
type Option func(*core)

// WithClock replaces the wall clock, for tests.
func WithClock(now func() time.Time) Option { return func(c *core) { c.now = now } }

// WithModules sets the module registry workflow definitions are checked against (default:
// the built-ins with their default options).
func WithModules(r *modules.Registry) Option { return func(c *core) { c.modules = r } }

// WithSealer sets the sealer callback secrets are sealed with before they enter an event;
// without one, a submit with a callback secret or headers is refused.
func WithSealer(s *seal.Sealer) Option { return func(c *core) { c.sealer = s } }

// WithBaseURL sets the URL the service is reached at from outside (no trailing slash), which
// approval URLs start with; default http://localhost:8080.
func WithBaseURL(u string) Option { return func(c *core) { c.baseURL = u } }

// New returns the handlers of every noun, appending to store.
func New(store eventstore.Store, opts ...Option) *Commands {
	c := &core{store: store, now: time.Now, cache: newStateCaches(stateCacheSize, map[string]int{execution.CacheCategory: windowCacheSize})}
	for _, o := range opts {
		o(c)
	}
	if c.modules == nil {
		c.modules = modules.Builtins(modules.BuiltinsConfig{})
	}
	identity := &Identity{core: c}
	balances := &balanceCheck{core: c}
	workflows := &Workflows{core: c, balanceCheck: balances}
	workspaces := &Workspaces{core: c, users: identity, workflows: workflows}
	billing := &Billing{core: c, workspaces: workspaces}
	streams, changes := &executionStreams{core: c}, &executionChanges{core: c}
	balances.billing = billing
	mods := &Modules{core: c, workspaces: workspaces}
	workflows.catalog = mods
	return &Commands{
		Executions: &Executions{core: c, executionStreams: streams, balanceCheck: balances, catalog: mods},
		Windows:    &Windows{core: c},
		Attempts:   &Attempts{core: c, executionStreams: streams, executionChanges: changes},
		Charges:    &Charges{core: c},
		Webhooks:   &Webhooks{core: c, executionStreams: streams, executionChanges: changes},
		Billing:    billing,
		Workflows:  workflows,
		RunQueues:  &RunQueues{core: c},
		Bulks:      &Bulks{core: c, workflows: workflows},
		Hooks:      &Hooks{core: c, workflows: workflows},
		Schedules:  &Schedules{core: c, workflows: workflows},
		Events:     &Events{core: c, workflows: workflows},
		Workspaces: workspaces,
		Modules:    mods,
		Identity:   identity,
		Apps:       &Apps{core: c, users: identity, workspaces: workspaces},
		Waits:      &Waits{core: c, workflows: workflows, due: newStateCache(dueCacheSize)},
		core:       c,
	}
}

// Result tells where a command's events landed.
type Result struct {
	Stream   string
	Revision uint64
	Position eventstore.Position
	// Appended is false when the decision produced no events (nothing to do).
	Appended bool
}

func isConflict(err error) bool { return errors.Is(err, eventstore.ErrWrongExpectedVersion) }

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
