package commands

import (
	"sync"

	"golang.org/x/sync/singleflight"
)

// The handler of each noun. A new command goes on the handler of the noun whose stream it
// appends to (docs/architecture.md, "Where does a new command go?"); a handler that would pass
// 25 methods is split (internal/archcheck holds that line).

// Executions accepts submits of component executions (execution_submit.go) and reads them
// (execution.go). Its submits hand their executions to this process's runner, when it has one.
type Executions struct {
	*core
	*executionStreams
	*balanceCheck
	// runner is this process's executor, when it runs one (WithRunner).
	runner Runner
	// catalog resolves the module a submit names, built-in or the workspace's own.
	catalog *Modules
}

// Windows keeps this process's cache windows current with the ones other processes open
// (window.go), as the log tells it (reactors/windows).
type Windows struct {
	*core
}

// Attempts claims the attempts of executions and records what they came to: the executor's
// commands (execution.go, execution_runner.go).
type Attempts struct {
	*core
	*executionStreams
	*executionChanges
}

// Charges bills finishing executions and records their outcomes in the same commit, a batch
// per workspace, taking turns on an account other processes charge too (execution_charge.go,
// contention.go).
type Charges struct {
	*core
	// contended remembers when another process last moved an account stream under this
	// one's batch (stream name to time), for ChargeAndFinish to take turns (contention.go).
	contended sync.Map
}

// Webhooks records the delivery attempts of executions' terminal webhooks and their replays
// (webhook.go).
type Webhooks struct {
	*core
	*executionStreams
	*executionChanges
}

// Billing holds workspaces' accounts: top-ups, plan renewals, charges and balances
// (billing.go).
type Billing struct {
	*core
	workspaces *Workspaces
}

// Workflows holds workflow definitions (workflow.go) and their runs (run.go).
type Workflows struct {
	// wake is told of each run this process triggers, once its trigger is written
	// (WithRunWaker); nil when no scheduler runs here.
	wake RunWaker
	// announce, when set, hears of each run before its trigger is written (WithRunAnnouncer).
	announce RunAnnouncer
	// runner is this process's executor, when it runs one (WithRunner): a new run's first
	// stage may run in it before the trigger is written, and ride in the trigger's commit
	// (run_first.go).
	runner Runner
	*core
	*balanceCheck
	// catalog resolves the modules of components, built-in or the workspace's own.
	catalog *Modules
}

// RunQueues holds the concurrency queues of workflow runs, one per workflow and key
// (run_queue.go): the scheduler settles them as runs of a key are triggered and end.
type RunQueues struct {
	*core
}

// Hooks holds the inbound webhooks of ON_WEBHOOK components (hook.go): their tokens and
// sealed secrets, and the signed deliveries that reach their components through deliver. A noun
// of its own (streams hook-<id>) so that Workflows does not grow.
type Hooks struct {
	*core
	workflows *Workflows
}

// Waits ends runs' waits from outside: signals and approvals (run_wait.go). The waits that
// end on time are ended by the scheduler's steps (Workflows.StepRun), those due together by
// FireDue on the runs PrefetchDue read ahead (run_wait_due.go).
type Waits struct {
	*core
	workflows *Workflows
	// due holds the runs read ahead of their waits' due time (run_wait_due.go).
	due *stateCache
}

// Schedules holds the ON_SCHEDULE components of workflows (schedule.go): pausing and
// resuming them, starting a run by hand, and deciding each fire once, whichever instance or
// restart asks. It starts runs through Workflows.
type Schedules struct {
	*core
	workflows *Workflows
}

// Events takes the events a workspace's systems send (event.go): it starts the runs of the
// ON_EVENT triggers they match, and the runs of debounced triggers' windows (debounce.go),
// through Workflows.
type Events struct {
	*core
	workflows *Workflows
}

// Bulks holds bulk actions on the runs of a workflow (bulk.go): it acts on each run through
// Workflows.
type Bulks struct {
	*core
	workflows *Workflows
}

// Workspaces holds workspaces and their members (workspace.go), access checks (access.go),
// API keys (apikey.go) and MCP tokens (mcptoken.go).
type Workspaces struct {
	*core
	users *Identity
	// workflows checks that an API key's allowed workflows are the workspace's own.
	workflows *Workflows
}

// Modules holds workspace modules (module.go) and resolves the module a submit or a workflow
// component names, built-in or the workspace's own (module_use.go).
type Modules struct {
	*core
	workspaces *Workspaces
	// compiled holds each module's compiled schemas (compiledSchemas), by stream.
	compiled sync.Map
	// fresh holds the modules submits used lately (*freshModule), by stream (module_use.go).
	fresh sync.Map
}

// Identity holds users (user.go), their sessions (session.go) and the provider's signing keys
// (signingkey.go).
type Identity struct {
	*core
}

// Apps holds OAuth apps (app.go) and the authorizations users give them (authorization.go).
type Apps struct {
	*core
	users *Identity
	// workspaces holds the roles consent is bounded by.
	workspaces *Workspaces
}

// executionStreams reads execution streams: what Executions, Attempts and Webhooks share
// (execution.go).
type executionStreams struct {
	*core
}

// executionChanges decides and appends on an execution stream, on its cached state when it
// can: what Attempts and Webhooks share (execution.go).
type executionChanges struct {
	*core
}

// balanceCheck is the advisory balance check of submits and triggers (execution.go): balances
// read recently, and one read of an account shared by the callers that need it at once.
type balanceCheck struct {
	*core
	billing *Billing
	// balances remembers recent balances for the advisory check of a submit.
	balances sync.Map
	// balanceReads lets one read of a workspace's account serve every submit whose balance
	// expired at the same moment (checkBalance).
	balanceReads singleflight.Group
}
