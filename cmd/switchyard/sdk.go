package main

import (
	"context"

	httpapi "github.com/switchyard/switchyard/http"
	"github.com/switchyard/switchyard/internal/replay"
)

// sdkAuth builds the SDK request authentication: keys folded from the event store (a key
// works the instant it is minted), replays refused across every process on the database, and
// the configured per-key rate limit.
func (a *app) sdkAuth(_ context.Context) (*httpapi.SDKAuth, error) {
	return httpapi.NewSDKAuth(httpapi.SDKAuthOptions{
		Lookup:        httpapi.LookupFromStore(a.cmds.APIKey),
		Replay:        replay.New(a.pool, replay.Options{Logger: a.log}),
		RatePerSecond: a.cfg.RateLimit,
		Burst:         a.cfg.RateBurst,
		Logger:        a.log,
	}), nil
}
