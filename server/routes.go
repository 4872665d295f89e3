// Package server assembles the service's routes from the /v1 API (httpapi), the OpenID Connect
// provider (identity) and the console: the one package above all three, so none of them
// imports another's routes.
package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/console"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/web/bearer"
)

// RoutesConfig is what the service's routes are built from. `serve` fills every part; a test
// leaves out the parts it does not exercise, and their routes with them.
type RoutesConfig struct {
	// Server configures the handler chain and the health, readiness and metrics endpoints.
	Server httpapi.ServerConfig
	// Cmds and Queries are required.
	Cmds    *commands.Commands
	Queries *projections.Queries
	// Registry and Hub serve the SDK and MCP endpoints; Hub also the run page's stream. (Callback
	// secrets are sealed by Cmds: commands.WithSealer.)
	Registry *modules.Registry
	Hub      *livehub.Hub
	// SDKAuth authenticates the SDK endpoints (API key and Ed25519 signature) and rate-limits
	// them and MCP; nil leaves the SDK and MCP endpoints out.
	SDKAuth *httpapi.SDKAuth
	// Tasks is the executor's task board, which the worker protocol's endpoints call (issue
	// 28); nil leaves them out.
	Tasks httpapi.TaskBoard
	// Workers lists, for the console's workers page, the workers that polled this process for a
	// workspace's tasks in the last minute; nil: none.
	Workers func(workspaceID string) []console.Worker
	// Identity is the OpenID Connect provider; nil leaves out sign-in, the workspace endpoints
	// and the console.
	Identity *identity.Provider
	// Bearer verifies the workspace endpoints' bearer tokens (Identity when nil).
	Bearer bearer.Verifier
	// CacheWindow is SWITCHYARD_CACHE_WINDOW: how long identical calls are free after the first.
	CacheWindow time.Duration
	// Heartbeat is SWITCHYARD_SSE_HEARTBEAT: the interval of :ping comments on streams.
	Heartbeat time.Duration
	// HookRatePerSecond and HookBurst size each inbound webhook's token bucket; zero: the
	// defaults of httpapi.HooksConfig.
	HookRatePerSecond float64
	HookBurst         int
}

// Validate reports a missing required dependency or a field out of range, by name. The
// defaults are set by the components (httpapi.NewServer, the SDK and stream handlers).
func (c RoutesConfig) Validate() error {
	switch {
	case c.Cmds == nil:
		return errors.New("server: RoutesConfig.Cmds is required")
	case c.Queries == nil:
		return errors.New("server: RoutesConfig.Queries is required")
	case c.CacheWindow < 0:
		return fmt.Errorf("server: CacheWindow %v: must not be negative", c.CacheWindow)
	case c.Heartbeat < 0:
		return fmt.Errorf("server: Heartbeat %v: must not be negative", c.Heartbeat)
	}
	if err := c.Server.Validate(); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	return nil
}

// Routes builds the service's routes: the one wiring `serve` and the tests share.
func Routes(cfg RoutesConfig) (*httpapi.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	srv := httpapi.NewServer(cfg.Server)
	log := srv.Logger()
	if cfg.SDKAuth != nil {
		(&httpapi.SDKComponents{Cmds: cfg.Cmds, Registry: cfg.Registry, Queries: cfg.Queries, Hub: cfg.Hub, Auth: cfg.SDKAuth,
			CacheWindow: cfg.CacheWindow, Heartbeat: cfg.Heartbeat}).Mount(srv.V1)
		if cfg.Tasks != nil {
			(&httpapi.SDKTasks{Tasks: cfg.Tasks, Auth: cfg.SDKAuth}).Mount(srv.V1)
		}
		(&httpapi.SDKWorkflows{Cmds: cfg.Cmds, Queries: cfg.Queries, Hub: cfg.Hub, Auth: cfg.SDKAuth, Heartbeat: cfg.Heartbeat}).Mount(srv.V1)
		// Approval URLs of WAIT stages: no session, the signed token is the credential.
		(&httpapi.Approvals{Cmds: cfg.Cmds}).Mount(srv.Router)
		(&httpapi.SDKEvents{Cmds: cfg.Cmds, Queries: cfg.Queries, Auth: cfg.SDKAuth}).Mount(srv.V1)
		// MCP (docs/mcp.md): X-Mcp-Token auth, the SDK endpoints' rate limiter, the same commands.
		(&httpapi.MCP{Cmds: cfg.Cmds, Queries: cfg.Queries, Registry: cfg.Registry, Hub: cfg.Hub, RateLimit: cfg.SDKAuth.Limit, ThrottleUnknown: cfg.SDKAuth.ThrottleUnknown,
			CacheWindow: cfg.CacheWindow, Logger: log}).Mount(srv.V1)
	}
	// Inbound webhooks (docs/workflows.md): the token in the URL and the sender's signature.
	hooks, err := httpapi.NewHooks(httpapi.HooksConfig{Cmds: cfg.Cmds, RatePerSecond: cfg.HookRatePerSecond, Burst: cfg.HookBurst})
	if err != nil {
		return nil, err
	}
	hooks.Mount(srv.Router)
	bearer := cfg.Bearer
	if cfg.Identity != nil {
		// Identity: the OIDC provider and sign-in at the root; the console's pages beside it.
		cfg.Identity.Mount(srv.Router, srv.V1)
		con, err := console.New(console.Config{Cmds: cfg.Cmds, Queries: cfg.Queries, Identity: cfg.Identity, Logger: log, Workers: cfg.Workers})
		if err != nil {
			return nil, err
		}
		con.Mount(srv.Router, srv.V1)
		if cfg.Hub != nil {
			(&httpapi.RunPageStream{Cmds: cfg.Cmds, Hub: cfg.Hub, Auth: cfg.Identity, Heartbeat: cfg.Heartbeat}).Mount(srv.Router)
		}
		if bearer == nil {
			bearer = cfg.Identity
		}
	}
	if bearer != nil {
		// The workspace endpoints (SPEC.md 4.9): an app's access token or a member's session JWT.
		(&httpapi.Workspaces{Cmds: cfg.Cmds, Queries: cfg.Queries, Auth: bearer}).Mount(srv.V1)
	}
	return srv, nil
}
