// Command worker runs a workspace module's code as a Switchyard worker (issue 28): it leases
// the module's tasks by long-poll, runs them, and reports each output, renewing its leases
// while a task runs. SIGTERM or Ctrl-C drains it: it stops leasing, lets what it holds finish
// (or fails it after -drain, for another worker to retry), then exits.
//
// It reads the service and the API key from the environment:
//
//	SWITCHYARD_URL         base URL of the service (default http://localhost:8080)
//	SWITCHYARD_API_KEY     the apiKey (ws_...) of the module's workspace
//	SWITCHYARD_API_SECRET  the apiSecret printed once when the key was minted
//
// Register the module first (transport {"type": "worker"}), then run
//
//	go run ./examples/worker -module acme.echo
//
// The handler answers {"echo": input}, after -delay (as long-running code would, heartbeats
// keeping its lease); an input with "fail" fails the attempt without retry. It prints
// "started EXECUTION_ID attempt N" as it begins a task, and "completed ..." or "failed ..."
// as it ends one.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/switchyard/switchyard/client"
)

func main() {
	var o options
	flag.StringVar(&o.module, "module", "acme.echo", "the workspace module whose tasks this worker runs")
	flag.IntVar(&o.concurrency, "concurrency", 4, "tasks run at once")
	flag.StringVar(&o.id, "id", "", "worker id shown in the console (default host/pid)")
	flag.DurationVar(&o.drain, "drain", 30*time.Second, "how long a shutdown waits for running tasks")
	flag.DurationVar(&o.delay, "delay", 0, "how long each task works before it answers")
	flag.DurationVar(&o.heartbeat, "heartbeat", 10*time.Second, "how often a running task's lease is renewed (and a cancelled run heard of)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// options are the worker's flags.
type options struct {
	module, id              string
	concurrency             int
	drain, delay, heartbeat time.Duration
}

func run(o options) error {
	c, err := clientFromEnv()
	if err != nil {
		return err
	}
	w, err := client.NewWorker(c, client.WorkerConfig{
		Handlers:          map[string]client.Handler{o.module: echo(o.delay)},
		Concurrency:       o.concurrency,
		WorkerID:          o.id,
		DrainTimeout:      o.drain,
		HeartbeatInterval: o.heartbeat,
		Logf:              func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("worker polling for %s\n", o.module)
	if err := w.Run(ctx); err != nil {
		return err
	}
	fmt.Println("worker drained")
	return nil
}

// echo is the module's code: it answers its input after delay, or fails when asked to.
func echo(delay time.Duration) client.Handler {
	return func(ctx context.Context, t client.Task) (any, error) {
		return answer(ctx, t, delay)
	}
}

func answer(ctx context.Context, t client.Task, delay time.Duration) (any, error) {
	fmt.Printf("started %s attempt %d\n", t.ExecutionID, t.Attempt)
	var in struct {
		Fail string `json:"fail"`
	}
	_ = json.Unmarshal(t.Input, &in)
	if delay > 0 {
		timer := time.NewTimer(delay)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			fmt.Printf("failed %s attempt %d\n", t.ExecutionID, t.Attempt)
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
	if in.Fail != "" {
		fmt.Printf("failed %s attempt %d\n", t.ExecutionID, t.Attempt)
		return nil, client.NonRetryable(&client.TaskError{Code: "asked_to_fail", Message: in.Fail})
	}
	fmt.Printf("completed %s attempt %d\n", t.ExecutionID, t.Attempt)
	return map[string]any{"echo": t.Input}, nil
}

func clientFromEnv() (*client.Client, error) {
	base := os.Getenv("SWITCHYARD_URL")
	if base == "" {
		base = "http://localhost:8080"
	}
	key, secret := os.Getenv("SWITCHYARD_API_KEY"), os.Getenv("SWITCHYARD_API_SECRET")
	if key == "" || secret == "" {
		return nil, errors.New("set SWITCHYARD_API_KEY and SWITCHYARD_API_SECRET (printed by scripts/run.sh on the first start, or by switchyard admin apikey create)")
	}
	c, err := client.New(base, key, secret)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}
