package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
)

// floorResponse is what the floor answers every submit: a CREATED execution, as the service
// answers a submit that does not wait.
const floorResponse = `{"id":"00000000-0000-4000-8000-000000000000","module":"core.echo","status":"CREATED",` +
	`"completed":false,"output":null,"error":null,"totalUsage":0,"callback":{"url":null,"headers":{}},` +
	`"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}`

// benchFloor measures the signed-request floor: what a submit costs before the service does
// anything with it. The same signed clients as the submit phase call the service's own SDK
// authentication (key check, timestamp, Ed25519 signature, replay guard, rate limit), here
// with the key and the replay guard in memory, in front of a handler that answers CREATED
// without reading or writing a database. No submit can be cheaper than this on the same
// machine, so scripts/bench-sdk.sh sets it beside pgbench: a target above what the floor and
// one durable insert leave is out of reach whatever the engine does.
func benchFloor(ctx context.Context, o benchOptions) (int64, *errTally, time.Duration, error) {
	minted, err := apikeys.Mint(uuid.New(), nil)
	if err != nil {
		return 0, nil, 0, err
	}
	pub, err := apikeys.ParsePublicKey(minted.PublicKey)
	if err != nil {
		return 0, nil, 0, err
	}
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{
		Lookup: func(_ context.Context, id string) (httpapi.SDKKey, error) {
			return httpapi.SDKKey{ID: id, WorkspaceID: "floor", KeyHash: minted.KeyHash, PublicKey: pub}, nil
		},
		RatePerSecond: 1e9, Burst: 1_000_000_000,
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/sdk/components", auth.Route(1, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, floorResponse)
	})))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, 0, err
	}
	srv := &http.Server{Handler: http.MaxBytesHandler(mux, 1<<20), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c, err := client.New("http://"+ln.Addr().String(), minted.APIKey, minted.APISecret, client.WithRetries(0))
	var n int64
	var errs *errTally
	var took time.Duration
	if err == nil {
		n, errs, took = benchSubmit(ctx, []*client.Client{c}, o.clients, o.duration)
	}
	_ = srv.Close() // ends Serve with http.ErrServerClosed
	if serr := <-served; err == nil && !errors.Is(serr, http.ErrServerClosed) {
		err = serr
	}
	return n, errs, took, err
}

// runFloor runs the floor phase and prints its line.
func runFloor(ctx context.Context, out io.Writer, o benchOptions) error {
	n, errs, took, err := benchFloor(ctx, o)
	if err != nil {
		return fmt.Errorf("bench floor: %w", err)
	}
	fmt.Fprintf(out, "floor: %d signed submits in %s with %d clients: %.0f submits/s (SDK authentication and HTTP only, no database; %s)\n",
		n, took.Round(time.Millisecond), o.clients, float64(n)/took.Seconds(), errs)
	return nil
}
