package main

import (
	"context"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/replay"
)

// sdkAuth builds the SDK request authentication: keys folded from the event store (a key
// works the instant it is minted), replays refused across every process on the database, the
// configured per-key rate limit and stream cap, and the owners of executions for scoped keys.
func (a *app) sdkAuth(_ context.Context) (*httpapi.SDKAuth, error) {
	// The Postgres event store shares the guard's database, so its commits can take a
	// submit's signature (docs/executions.md, "Replays").
	_, claims := a.store.(eventstore.ClaimStore)
	return httpapi.NewSDKAuth(httpapi.SDKAuthConfig{
		Lookup:           httpapi.LookupFromStore(a.cmds.Workspaces.APIKey),
		Replay:           replay.New(a.pool, replay.Config{Logger: a.log}),
		ClaimsInCommits:  claims,
		RatePerSecond:    a.cfg.RateLimit,
		Burst:            a.cfg.RateBurst,
		MaxStreamsPerKey: a.cfg.MaxStreamsPerKey,
		ExecutionOwner:   httpapi.ExecutionOwnerFrom(a.cmds),
		Logger:           a.log,
	}), nil
}
