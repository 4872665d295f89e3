package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
)

// benchOptions are the knobs of `switchyard bench`.
type benchOptions struct {
	clients  int
	duration time.Duration
	rate     int
	total    int
	profile  string
	// submitOnly runs the service without its executor, to measure the submit path alone.
	submitOnly bool
}

func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench [submit|wait|e2e]...",
		Short: "Measure the SDK API on this machine: submit throughput, waitForMs latency, end-to-end executions/s",
		Long: "bench starts the service in this process on a loopback port against DATABASE_URL (it migrates\n" +
			"the schema and creates a throw-away workspace with credits and an API key), then drives it\n" +
			"with the Go client over real HTTP with signed requests:\n\n" +
			"  submit  --clients concurrent signed submits of core.echo without waiting, for --duration\n" +
			"  wait    submits with waitForMs at --rate requests/s for --duration; latency percentiles\n" +
			"  e2e     --total submits, then waits until every one is COMPLETED and charged\n\n" +
			"Use a scratch database: the benchmark's events stay in its log. Compare submit with\n" +
			"scripts/bench-sdk.sh, which also measures pgbench's single-row insert ceiling.",
		ValidArgs: []string{"submit", "wait", "e2e"},
		Args:      cobra.OnlyValidArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"submit", "wait", "e2e"}
			}
			return runBench(cmd.Context(), cmd.OutOrStdout(), o, args)
		},
	}
	cmd.Flags().IntVar(&o.clients, "clients", 32, "concurrent clients for submit and e2e")
	cmd.Flags().DurationVar(&o.duration, "duration", 10*time.Second, "how long submit and wait run")
	cmd.Flags().IntVar(&o.rate, "rate", 200, "requests per second for wait")
	cmd.Flags().IntVar(&o.total, "total", 10000, "executions for e2e")
	cmd.Flags().BoolVar(&o.submitOnly, "submit-only", false, "run no executor: submits are accepted but not executed (measures the submit path alone; use with the submit phase)")
	cmd.Flags().StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the whole run (service and load) to this file")
	return cmd
}

func runBench(ctx context.Context, out io.Writer, o benchOptions, phases []string) error {
	a, err := openApp(ctx, true)
	if err != nil {
		return err
	}
	defer a.Close()
	a.cfg.Listen = "127.0.0.1:0"
	a.noExecutor = o.submitOnly
	a.cfg.RateLimit, a.cfg.RateBurst = 1e9, 1_000_000_000
	a.cfg.CacheWindow = 0 // every call runs and bills: the cache would measure itself
	key, err := benchKey(ctx, a)
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- a.serve(sctx, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		return err
	}
	c, err := client.New("http://"+addr, key.APIKey, key.APISecret, client.WithRetries(0))
	if err != nil {
		return err
	}
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, phase := range phases {
		if err := benchPhase(ctx, out, o, c, phase); err != nil {
			return fmt.Errorf("bench %s: %w", phase, err)
		}
	}
	stop()
	return <-served
}

// benchKey creates a throw-away owner, workspace with ample credits, and API key.
func benchKey(ctx context.Context, a *app) (commands.APIKeyMinted, error) {
	email := "bench-" + uuid.NewString()[:8] + "@bench.invalid"
	if _, err := a.cmds.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: uuid.NewString()}); err != nil {
		return commands.APIKeyMinted{}, err
	}
	ws, err := a.cmds.CreateWorkspace(ctx, "bench "+email, email)
	if err != nil {
		return commands.APIKeyMinted{}, err
	}
	if _, err := a.cmds.TopUp(ctx, ws, billing.FromWhole(100_000_000), ""); err != nil {
		return commands.APIKeyMinted{}, err
	}
	return a.cmds.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws, Label: "bench"})
}

func benchPhase(ctx context.Context, out io.Writer, o benchOptions, c *client.Client, phase string) error {
	switch phase {
	case "submit":
		n, errs, took := benchSubmit(ctx, c, o.clients, o.duration)
		fmt.Fprintf(out, "submit: %d submits in %s with %d clients: %.0f submits/s (%d errors)\n",
			n, took.Round(time.Millisecond), o.clients, float64(n)/took.Seconds(), errs)
	case "wait":
		lat, errs := benchWait(ctx, c, o.rate, o.duration)
		fmt.Fprintf(out, "wait: %d submits with waitForMs at %d/s: p50 %s, p90 %s, p99 %s, max %s (%d errors)\n",
			len(lat), o.rate, pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100), errs)
	case "e2e":
		took, err := benchE2E(ctx, c, o.clients, o.total)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "e2e: %d executions submitted and COMPLETED in %s: %.0f executions/s\n",
			o.total, took.Round(time.Millisecond), float64(o.total)/took.Seconds())
	}
	return nil
}

var echo = client.SubmitRequest{Module: "core.echo", Input: map[string]int{"n": 1}}

func benchSubmit(ctx context.Context, c *client.Client, clients int, d time.Duration) (int64, int64, time.Duration) {
	var n, errs atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := c.Submit(ctx, echo); err != nil {
					errs.Add(1)
					continue
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load(), errs.Load(), time.Since(start)
}

// benchWait sends submits with waitForMs at a fixed rate (open loop: a slow answer does not
// delay the next request) and returns the latency of each completed one.
func benchWait(ctx context.Context, c *client.Client, rate int, d time.Duration) ([]time.Duration, int64) {
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	req := echo
	req.WaitForMs = 15000
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; <-tick.C {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			e, err := c.Submit(ctx, req)
			took := time.Since(start)
			if err != nil || e.Status != client.StatusCompleted {
				errs.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, took)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, errs.Load()
}

// benchE2E submits total executions and polls until each is COMPLETED.
func benchE2E(ctx context.Context, c *client.Client, clients, total int) (time.Duration, error) {
	start := time.Now()
	ids := make(chan string, total)
	var failed atomic.Int64
	var wg sync.WaitGroup
	var next atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) {
				e, err := c.Submit(ctx, echo)
				if err != nil {
					failed.Add(1)
					continue
				}
				ids <- e.ID
			}
		}()
	}
	wg.Wait()
	close(ids)
	if failed.Load() > 0 {
		return 0, fmt.Errorf("%d submits failed", failed.Load())
	}
	for id := range ids {
		for {
			e, err := c.GetExecution(ctx, id)
			if err != nil {
				return 0, err
			}
			if e.Status == client.StatusFailed {
				return 0, errors.New("execution " + id + " failed: " + string(e.Error))
			}
			if e.Status == client.StatusCompleted {
				break
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return time.Since(start), nil
}

// pct is the p-th percentile of sorted latencies.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, (len(sorted)*p)/100)
	return sorted[i].Round(10 * time.Microsecond)
}
