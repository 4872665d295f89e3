package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	// memProfile is where the allocations of the phases go (pprof's allocs profile).
	memProfile string
	// trace is where an execution trace of the phases goes (go tool trace): what a section
	// that runs one at a time, such as the charge rounds, waits for.
	trace string
	// submitOnly runs the service without its executor, to measure the submit path alone.
	submitOnly bool
	// instances is how many service instances share the database (each with its own pool,
	// event store, executor and projections); clients are spread over them.
	instances int
	// workspaces is how many workspaces the clients' calls are spread over, each with its own
	// account and key, as a platform's many tenants are; every workspace is called on every
	// instance.
	workspaces int
	// pinWorkspaces calls workspace i on instance i mod --instances only, so that no two
	// instances charge one account: the upper bound of per-instance lanes
	// (docs/architecture.md), measured without building them.
	pinWorkspaces bool
	idle          int
	// runs is how many workflow runs the runs phase's --clients callers complete.
	runs int
	// idlePolls is how many waiting polls the worker phase holds open to weigh them.
	idlePolls int
	// cacheWindow is the service's cache window: 0, the default here, so that every call runs
	// and bills; with one, e2e submits distinct inputs, so that each call runs and opens its
	// own window, as distinct calls do under the service's default (SWITCHYARD_CACHE_WINDOW).
	cacheWindow time.Duration
	// target, when set, is the base URL of a separately started `serve` on DATABASE_URL, or
	// several comma-separated: the phases drive them instead of a service in this process.
	target string
}

func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench [submit|wait|idle|e2e|runs|worker|floor]...",
		Short: "Measure the SDK API on this machine: submit throughput, waitForMs latency, end-to-end executions/s",
		Long: "bench starts the service in this process on a loopback port against DATABASE_URL (it migrates\n" +
			"the schema and creates a throw-away workspace with credits and an API key), then drives it\n" +
			"with the Go client over real HTTP with signed requests:\n\n" +
			"  submit  --clients concurrent signed submits of core.echo without waiting, for --duration\n" +
			"  wait    submits with waitForMs at --rate requests/s for --duration; latency percentiles\n" +
			"  idle    --idle submits with waitForMs one at a time (one caller, idle server); latency percentiles\n" +
			"  e2e     --total submits, then waits until every one is COMPLETED and charged; then what an\n" +
			"          execution cost: this process's CPU (service and load) and the database's commits\n" +
			"  runs    a workflow of three core.echo stages (ON_API_CALLED -> a -> b -> c), each run\n" +
			"          triggered and followed on its stream to COMPLETED: --idle runs one at a time\n" +
			"          (latency percentiles), then --runs runs by --clients callers (runs/s and\n" +
			"          stages/s, with stages/s over e2e's executions/s when e2e ran before it)\n" +
			"  worker  a workspace module (bench.echo) run by a worker in a process of its own\n" +
			"          (switchyard bench-worker, the Go client's Worker): --total executions of it\n" +
			"          end to end against --total of core.echo in the same run; dispatch (submit\n" +
			"          accepted until the worker holds the task) at --rate submits/s for --duration;\n" +
			"          and --idle submits with waitForMs through the worker one at a time; each with\n" +
			"          CPU (here and in the worker) and database commits per execution\n" +
			"  floor   the submit phase against the service's SDK authentication alone (key, timestamp,\n" +
			"          signature, replay guard and rate limit in memory) and a handler that answers\n" +
			"          CREATED without a database: the least a submit can cost here (needs no database)\n\n" +
			"Each phase starts once the executions of the one before have ended. With --instances 2,\n" +
			"two service instances (each with its own pool, event store, executor and projections)\n" +
			"share the database and the clients are spread over both; the run ends with the claims\n" +
			"the instances lost to each other (switchyard_executor_claims_lost_total). With\n" +
			"--cache-window, the service keeps cache windows (as it does by default) and e2e's calls\n" +
			"have distinct inputs, so each runs, bills and opens its own window. With --workspaces N,\n" +
			"the calls are spread over N workspaces of one owner, each with its own credits and key,\n" +
			"and each called on every instance (as a platform's tenants are behind a load balancer);\n" +
			"with --pin-workspaces, workspace i is called on instance i mod --instances only, so no two\n" +
			"instances charge one account (the upper bound of per-instance lanes).\n\n" +
			"With --target URL, the phases drive a separately started `serve` at URL instead, as an\n" +
			"outside client would: DATABASE_URL and the secret key (SWITCHYARD_SECRET_KEY or\n" +
			"SWITCHYARD_DATA_DIR) must be that serve's, for the bench mints its workspace and API key\n" +
			"there and reads the read model to see executions end. The serve's own configuration\n" +
			"then decides its cache window and rate limit; --cache-window only makes e2e's calls\n" +
			"distinct. With several comma-separated URLs (serves sharing DATABASE_URL), the clients are\n" +
			"spread over them as --instances spreads them over instances in this process, and the run\n" +
			"ends with the claims they lost to each other, read from each serve's /metrics.\n\n" +
			"Use a scratch database: the benchmark's events stay in its log. Compare submit with\n" +
			"scripts/bench-sdk.sh, which also measures pgbench's single-row insert ceiling.",
		ValidArgs: []string{"submit", "wait", "idle", "e2e", "runs", "worker", "floor"},
		Args:      cobra.OnlyValidArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"submit", "wait", "idle", "e2e"}
			}
			tuneGC(os.Getenv) // the service in this process runs as serve runs it
			var phases []string
			for _, phase := range args {
				if phase != "floor" {
					phases = append(phases, phase)
					continue
				}
				if err := runFloor(cmd.Context(), cmd.OutOrStdout(), o); err != nil {
					return err
				}
			}
			if len(phases) == 0 {
				return nil // the floor needs no database
			}
			return runBench(cmd.Context(), cmd.OutOrStdout(), o, phases)
		},
	}
	cmd.Flags().IntVar(&o.clients, "clients", 32, "concurrent clients for submit, e2e and runs")
	cmd.Flags().DurationVar(&o.duration, "duration", 10*time.Second, "how long submit and wait run")
	cmd.Flags().IntVar(&o.rate, "rate", 200, "requests per second for wait")
	cmd.Flags().IntVar(&o.total, "total", 10000, "executions for e2e")
	cmd.Flags().IntVar(&o.idle, "idle", 200, "submits for idle, and runs one at a time for runs")
	cmd.Flags().IntVar(&o.runs, "runs", 1000, "workflow runs for runs' --clients callers")
	cmd.Flags().IntVar(&o.idlePolls, "idle-polls", 1000, "polls the worker phase holds open, waiting, to weigh them")
	cmd.Flags().IntVar(&o.instances, "instances", 1, "service instances sharing the database (1 to 4)")
	cmd.Flags().IntVar(&o.workspaces, "workspaces", 1, "workspaces the calls are spread over, each with its own account and key, each called on every instance")
	cmd.Flags().BoolVar(&o.pinWorkspaces, "pin-workspaces", false, "call workspace i on instance i mod --instances only (needs --workspaces at least --instances): no account charged by two instances")
	cmd.Flags().DurationVar(&o.cacheWindow, "cache-window", 0, "the service's cache window (0: none, every call runs); with one, e2e's calls have distinct inputs")
	cmd.Flags().BoolVar(&o.submitOnly, "submit-only", false, "run no executor: submits are accepted but not executed (measures the submit path alone; use with the submit phase)")
	cmd.Flags().StringVar(&o.target, "target", "", "base URL of a separately started serve on DATABASE_URL to drive instead of one in this process; several, comma-separated, for serves sharing it")
	cmd.Flags().StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the whole run (service and load) to this file")
	cmd.Flags().StringVar(&o.memProfile, "memprofile", "", "write the allocations of the phases (service and load) to this file, for go tool pprof -sample_index=alloc_space")
	cmd.Flags().StringVar(&o.trace, "trace", "", "write an execution trace of the phases (service and load) to this file, for go tool trace; keep --total small, it grows by megabytes a second")
	return cmd
}

func runBench(ctx context.Context, out io.Writer, o benchOptions, phases []string) error {
	if o.instances < 1 || o.instances > 4 {
		return fmt.Errorf("--instances must be from 1 to 4")
	}
	if o.cacheWindow < 0 {
		return fmt.Errorf("--cache-window must not be negative")
	}
	if slices.Contains(phases, "runs") && (o.runs < 1 || o.idle < 0) {
		return fmt.Errorf("--runs must be at least 1 and --idle not negative for the runs phase")
	}
	if o.workspaces < 1 || o.workspaces > 64 {
		return fmt.Errorf("--workspaces must be from 1 to 64")
	}
	if o.workspaces > 1 && (slices.Contains(phases, "runs") || slices.Contains(phases, "worker")) {
		return fmt.Errorf("--workspaces: the runs and worker phases use one workspace; run them without it")
	}
	if o.pinWorkspaces && (o.instances < 2 || o.workspaces < o.instances) {
		return fmt.Errorf("--pin-workspaces needs --instances 2 or more and at least as many --workspaces")
	}
	targets, err := benchTargets(o.target)
	if err != nil {
		return err
	}
	if len(targets) > 0 && (o.instances != 1 || o.submitOnly || o.pinWorkspaces) {
		return fmt.Errorf("--target drives each serve as it is configured (one instance per URL): without --instances, --pin-workspaces and --submit-only")
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var apps []*app
	var clients []*client.Client
	var served []chan error
	var bases []string
	var keys []commands.APIKeyMinted
	var workspaces []string
	for i := range o.instances {
		a, err := openApp(ctx, i == 0)
		if err != nil {
			return err
		}
		defer a.Close()
		a.cfg.Listen = "127.0.0.1:0"
		a.noExecutor = o.submitOnly
		a.cfg.RateLimit, a.cfg.RateBurst = 1e9, 1_000_000_000
		// Without a window every call runs and bills (the cache would measure itself); with one,
		// e2e's distinct calls each open a window of their own.
		a.cfg.CacheWindow = o.cacheWindow
		if i == 0 {
			if keys, workspaces, err = benchKeys(ctx, a, o.workspaces); err != nil {
				return err
			}
		}
		apps = append(apps, a)
		if len(targets) == 0 {
			addr, done, err := benchServe(sctx, a)
			if err != nil {
				return err
			}
			bases, served = append(bases, "http://"+addr), append(served, done)
		}
	}
	if len(targets) > 0 {
		bases = targets
	}
	clients, err = benchClients(bases, keys, o.pinWorkspaces)
	if err != nil {
		return err
	}
	key, workspace := keys[0], workspaces[0]
	if o.profile != "" {
		stop, err := recordTo(o.profile, pprof.StartCPUProfile, pprof.StopCPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if o.memProfile != "" {
		// The profile holds what was allocated since the process started; a cycle now leaves
		// the set-up's allocations behind as the baseline pprof -diff_base can subtract.
		runtime.GC()
		defer writeAllocs(o.memProfile)
	}
	if o.trace != "" {
		stop, err := recordTo(o.trace, trace.Start, trace.Stop)
		if err != nil {
			return err
		}
		defer stop()
	}
	var e2eRate float64 // e2e's executions/s, which runs compares its stages/s with
	for _, phase := range phases {
		counts := func(ctx context.Context) (map[string]int, error) {
			return benchCounts(ctx, apps[0], workspaces)
		}
		var err error
		var cost *benchCost // e2e's, in this process: what an execution costs, beside its rate
		var rounds *benchRounds
		if phase == "e2e" && o.target == "" && !o.submitOnly {
			cost, rounds = startBenchCost(ctx, apps[0], 0), startBenchRounds(apps)
		}
		switch phase {
		case "runs":
			err = benchRunsPhase(ctx, out, o, apps[0], workspace, clients, e2eRate)
		case "worker":
			err = benchWorkerPhase(ctx, out, o, apps[0], workspace, key, bases[0], clients, counts)
		default:
			err = benchPhase(ctx, out, o, clients, counts, phase, &e2eRate)
		}
		if err != nil {
			return fmt.Errorf("bench %s: %w", phase, err)
		}
		if rounds != nil {
			fmt.Fprintf(out, "e2e charge rounds: %s\n", rounds.end())
		}
		if !o.submitOnly {
			if err := benchDrain(ctx, apps[0], workspaces); err != nil {
				return err
			}
		}
		if cost != nil {
			// After the drain: the projectors' commits for the phase's executions count too.
			fmt.Fprintf(out, "e2e cost per execution: %s\n", cost.end(ctx, o.total))
		}
	}
	if len(bases) > 1 && !o.submitOnly {
		var claims, lost float64
		for i := range bases {
			var gather prometheus.Gatherer
			if len(targets) == 0 {
				gather = apps[i].registry
			} else if gather, err = scrapeMetrics(ctx, bases[i]); err != nil {
				return err
			}
			claims += gatherCounter(gather, "switchyard_executor_claims_total")
			lost += gatherCounter(gather, "switchyard_executor_claims_lost_total")
		}
		fmt.Fprintf(out, "claims: %.0f lost of %.0f over %d instances (%.2f%%)\n", lost, claims, len(bases), 100*lost/max(claims, 1))
	}
	stop()
	for _, done := range served {
		if err := <-done; err != nil {
			return err
		}
	}
	return nil
}

// writeAllocs writes the allocs profile to path; a failure is reported, not fatal: the figures
// have been printed.
func writeAllocs(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: memprofile: %v\n", err)
	}
}

// benchServe starts a's service on a loopback port and returns its address and the channel
// its end is reported on.
func benchServe(ctx context.Context, a *app) (string, chan error, error) {
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- a.serve(ctx, ready) }()
	select {
	case addr := <-ready:
		return addr, served, nil
	case err := <-served:
		return "", nil, err
	}
}

// benchDrain waits until the workspaces have no unfinished execution and every projector has
// caught up with the log, so that each phase measures itself rather than the backlog of the
// one before.
func benchDrain(ctx context.Context, a *app, workspaceIDs []string) error {
	for {
		counts, err := benchCounts(ctx, a, workspaceIDs)
		if err != nil {
			return err
		}
		if counts["CREATED"]+counts["RUNNING"] == 0 {
			caught, err := projectionsCaughtUp(ctx, a)
			if err != nil || caught {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// projectionsCaughtUp reports whether every projector has applied the whole log.
func projectionsCaughtUp(ctx context.Context, a *app) (bool, error) {
	status, err := a.engine.Status(ctx)
	if err != nil {
		return false, err
	}
	for _, st := range status {
		if st.Lag > 0 {
			return false, nil
		}
	}
	return true, nil
}

// gatherCounter reads a counter of a's metrics (0 when absent).
func gatherCounter(g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// benchKeys creates a throw-away owner and n workspaces of it, each with ample credits and an
// API key.
func benchKeys(ctx context.Context, a *app, n int) ([]commands.APIKeyMinted, []string, error) {
	email := "bench-" + uuid.NewString()[:8] + "@bench.invalid"
	if _, err := a.cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: uuid.NewString()}); err != nil {
		return nil, nil, err
	}
	keys, workspaces := make([]commands.APIKeyMinted, n), make([]string, n)
	for i := range n {
		ws, err := a.cmds.Workspaces.CreateWorkspace(ctx, fmt.Sprintf("bench %s %d", email, i), email)
		if err != nil {
			return nil, nil, err
		}
		if _, err := a.cmds.Billing.TopUp(ctx, ws, billing.FromWhole(100_000_000), ""); err != nil {
			return nil, nil, err
		}
		if keys[i], err = a.cmds.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws, Label: "bench"}); err != nil {
			return nil, nil, err
		}
		workspaces[i] = ws
	}
	return keys, workspaces, nil
}

// benchClients is a client for every pair benchPairs gives, in its order.
func benchClients(bases []string, keys []commands.APIKeyMinted, pinned bool) ([]*client.Client, error) {
	var cs []*client.Client
	for _, p := range benchPairs(len(keys), len(bases), pinned) {
		c, err := client.New(bases[p.base], keys[p.key].APIKey, keys[p.key].APISecret, client.WithRetries(0))
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// benchPair is one workspace's key (key) called on one instance (base).
type benchPair struct{ key, base int }

// benchPairs orders the workspace-instance pairs so that the phases' callers, which take
// cs[i % len(cs)], go round the instances first: caller i calls instance i % bases in
// workspace (i / bases) % keys. Every workspace is thereby called on every instance, as behind
// a load balancer without stickiness; pinned, workspace k is called on instance k % bases only.
func benchPairs(keys, bases int, pinned bool) []benchPair {
	var ps []benchPair
	for k := range keys {
		for b := range bases {
			if !pinned || b == k%bases {
				ps = append(ps, benchPair{k, b})
			}
		}
	}
	return ps
}

// benchCounts counts the executions of the workspaces by status, from the read model.
func benchCounts(ctx context.Context, a *app, workspaceIDs []string) (map[string]int, error) {
	sum := map[string]int{}
	for _, ws := range workspaceIDs {
		counts, err := a.queries.ExecutionCounts(ctx, ws)
		if err != nil {
			return nil, err
		}
		for status, n := range counts {
			sum[status] += n
		}
	}
	return sum, nil
}

// executionCounts counts the bench workspace's executions by status, from the read model.
type executionCounts func(context.Context) (map[string]int, error)

// benchPhase runs one of submit, wait, idle and e2e; e2e leaves its executions/s in e2eRate.
func benchPhase(ctx context.Context, out io.Writer, o benchOptions, c []*client.Client, counts executionCounts, phase string, e2eRate *float64) error {
	switch phase {
	case "submit":
		n, errs, took := benchSubmit(ctx, c, o.clients, o.duration)
		fmt.Fprintf(out, "submit: %d submits in %s with %d clients: %.0f submits/s (%s)\n",
			n, took.Round(time.Millisecond), o.clients, float64(n)/took.Seconds(), errs)
	case "wait":
		lat, errs := benchWait(ctx, c, o.rate, o.duration)
		fmt.Fprintf(out, "wait: %d submits with waitForMs at %d/s: p50 %s, p90 %s, p99 %s, max %s (%s)\n",
			len(lat), o.rate, pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100), errs)
	case "idle":
		lat, errs := benchIdle(ctx, c[0], o.idle)
		fmt.Fprintf(out, "idle: %d submits with waitForMs one at a time: p50 %s, p90 %s, p99 %s, max %s (%s)\n",
			len(lat), pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100), errs)
	case "e2e":
		took, err := benchE2E(ctx, c, counts, o.clients, o.total, o.cacheWindow > 0)
		if err != nil {
			return err
		}
		*e2eRate = float64(o.total) / took.Seconds()
		fmt.Fprintf(out, "e2e: %d executions submitted and COMPLETED in %s: %.0f executions/s\n",
			o.total, took.Round(time.Millisecond), *e2eRate)
	}
	return nil
}

var echo = client.SubmitRequest{Module: "core.echo", Input: map[string]int{"n": 1}}

// errTally counts a phase's failed requests and keeps the first one's error, so a figure with
// errors says what they were (a 429, a 503, a timeout) instead of only how many.
type errTally struct {
	n     atomic.Int64
	first atomic.Value // string
}

func (t *errTally) add(err error) {
	t.n.Add(1)
	t.first.CompareAndSwap(nil, err.Error())
}

// String is "N errors", with the first error when there was one.
func (t *errTally) String() string {
	if first, ok := t.first.Load().(string); ok {
		return fmt.Sprintf("%d errors; first: %s", t.n.Load(), first)
	}
	return fmt.Sprintf("%d errors", t.n.Load())
}

// notCompleted is the error of a waiting submit that answered before its execution ended.
func notCompleted(e *client.Execution, err error) error {
	switch {
	case err != nil:
		return err
	case e == nil:
		return errors.New("no execution in the answer")
	case e.Status != client.StatusCompleted:
		return fmt.Errorf("execution %s answered %s", e.ID, e.Status)
	}
	return nil
}

func benchSubmit(ctx context.Context, cs []*client.Client, clients int, d time.Duration) (int64, *errTally, time.Duration) {
	var n atomic.Int64
	errs := &errTally{}
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range clients {
		c := cs[i%len(cs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := c.Submit(ctx, echo); err != nil {
					errs.add(err)
					continue
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load(), errs, time.Since(start)
}

// benchWait sends submits with waitForMs at a fixed rate (open loop: a slow answer does not
// delay the next request) and returns the latency of each completed one.
func benchWait(ctx context.Context, cs []*client.Client, rate int, d time.Duration) ([]time.Duration, *errTally) {
	var mu sync.Mutex
	var lat []time.Duration
	errs := &errTally{}
	req := echo
	req.WaitForMs = 15000
	openLoop(ctx, cs, rate, d, func(c *client.Client) {
		start := time.Now()
		e, err := c.Submit(ctx, req)
		took := time.Since(start)
		if err := notCompleted(e, err); err != nil {
			errs.add(err)
			return
		}
		mu.Lock()
		lat = append(lat, took)
		mu.Unlock()
	})
	slices.Sort(lat)
	return lat, errs
}

// openLoop calls call at rate for d, each call in a goroutine of its own (a slow answer does
// not delay the next), spreading them over cs, and returns once every call has.
func openLoop(ctx context.Context, cs []*client.Client, rate int, d time.Duration, call func(c *client.Client)) {
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; <-tick.C {
		c := cs[n%len(cs)]
		n++
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(c)
		}()
	}
	wg.Wait()
}

// benchIdle sends n submits with waitForMs one after the other and returns their latencies.
func benchIdle(ctx context.Context, c *client.Client, n int) ([]time.Duration, *errTally) {
	req := echo
	req.WaitForMs = 15000
	return benchIdleOf(ctx, c, n, req)
}

// benchIdleOf is benchIdle of req's calls.
func benchIdleOf(ctx context.Context, c *client.Client, n int, req client.SubmitRequest) ([]time.Duration, *errTally) {
	var lat []time.Duration
	errs := &errTally{}
	for range n {
		start := time.Now()
		e, err := c.Submit(ctx, req)
		if err := notCompleted(e, err); err != nil {
			errs.add(err)
			continue
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat, errs
}

// benchE2E submits total executions and waits until the read model shows each COMPLETED
// (charged before it completes); the last one is then read back over the API. Polling each
// execution over HTTP one by one would measure the poller rather than the engine.
func benchE2E(ctx context.Context, cs []*client.Client, counts executionCounts, clients, total int, distinct bool) (time.Duration, error) {
	module := ""
	if distinct {
		module = echo.Module
	}
	return benchE2EOf(ctx, cs, counts, clients, total, module)
}

// benchE2EOf is benchE2E of core.echo's identical calls (module "") or of distinct calls of
// module.
func benchE2EOf(ctx context.Context, cs []*client.Client, counts executionCounts, clients, total int, module string) (time.Duration, error) {
	before, err := counts(ctx)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	failed := &errTally{}
	// The last call made, with its caller: in another workspace than cs[0]'s, it is not
	// cs[0]'s to read.
	type call struct {
		c  *client.Client
		id string
	}
	var last atomic.Value
	var wg sync.WaitGroup
	var next atomic.Int64
	for i := range clients {
		c := cs[i%len(cs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= int64(total); n = next.Add(1) {
				req := echo
				if module != "" {
					req.Module, req.Input = module, map[string]int64{"n": n}
				}
				e, err := c.Submit(ctx, req)
				if err != nil {
					failed.add(err)
					continue
				}
				last.Store(call{c, e.ID})
			}
		}()
	}
	wg.Wait()
	if failed.n.Load() > 0 {
		return 0, fmt.Errorf("submits failed: %s", failed)
	}
	for {
		now, err := counts(ctx)
		if err != nil {
			return 0, err
		}
		if n := now["FAILED"] - before["FAILED"]; n > 0 {
			return 0, fmt.Errorf("%d executions failed", n)
		}
		if now["COMPLETED"]-before["COMPLETED"] >= total {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	took := time.Since(start)
	lc := last.Load().(call)
	e, err := lc.c.GetExecution(ctx, lc.id)
	if err != nil {
		return 0, err
	}
	if e.Status != client.StatusCompleted {
		return 0, errors.New("execution " + e.ID + " is " + string(e.Status) + " after the read model counted it COMPLETED")
	}
	return took, nil
}

// pct is the p-th percentile of sorted latencies.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, (len(sorted)*p)/100)
	return sorted[i].Round(10 * time.Microsecond)
}

// recordTo creates path and starts a recording into it (a CPU profile, an execution trace); the
// returned func stops the recording and closes the file.
func recordTo(path string, start func(io.Writer) error, stop func()) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { stop(); f.Close() }, nil
}

// benchTargets splits --target's comma-separated base URLs of separately started serve
// processes (none when empty); each must be an absolute http or https URL.
func benchTargets(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var out []string
	for _, t := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(t))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--target: %q is not an http or https base URL", t)
		}
		out = append(out, strings.TrimRight(u.String(), "/"))
	}
	return out, nil
}

// scrapeMetrics reads a separately started serve's /metrics, for the counters the bench
// reports of in-process instances from their registries.
func scrapeMetrics(ctx context.Context, base string) (prometheus.Gatherer, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: %s", base, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", base, err)
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return slices.Collect(maps.Values(families)), nil
	}), nil
}
