package main

import (
	"context"

	httpapi "github.com/switchyard/switchyard/http"
	"github.com/switchyard/switchyard/internal/replay"
)

// sdkAuth builds the SDK request authentication: keys folded from the event store (a key
// works the instant it is minted), replays refused across every process on the database, the
// configured per-key rate limit and stream cap, and the owners of executions for scoped keys.
func (a *app) sdkAuth(_ context.Context) (*httpapi.SDKAuth, error) {
	return httpapi.NewSDKAuth(httpapi.SDKAuthConfig{
		Lookup:           httpapi.LookupFromStore(a.cmds.APIKey),
		Replay:           replay.New(a.pool, replay.Config{Logger: a.log}),
		RatePerSecond:    a.cfg.RateLimit,
		Burst:            a.cfg.RateBurst,
		MaxStreamsPerKey: a.cfg.MaxStreamsPerKey,
		ExecutionOwner:   httpapi.ExecutionOwnerFrom(a.cmds),
		Logger:           a.log,
	}), nil
}
