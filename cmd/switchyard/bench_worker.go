package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/commands"
)

// benchWorkerModule is the workspace module the worker phase registers: an echo run by a
// worker in a process of its own.
const benchWorkerModule = "bench.echo"

// Environment of the worker process the worker phase starts.
const (
	envBenchWorkerURL    = "SWITCHYARD_BENCH_WORKER_URL"
	envBenchWorkerKey    = "SWITCHYARD_BENCH_WORKER_KEY"
	envBenchWorkerSecret = "SWITCHYARD_BENCH_WORKER_SECRET"
)

// newBenchWorkerCmd is the worker process of `bench worker`: a client.Worker echoing the
// bench module's input, printing "held ID UNIXNANO" as it receives each task, so the bench can
// time dispatch (submit accepted until the worker holds the task).
func newBenchWorkerCmd() *cobra.Command {
	var idle int
	cmd := &cobra.Command{
		Use:    "bench-worker",
		Short:  "The worker process of `switchyard bench worker` (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if idle > 0 {
				return holdIdlePolls(cmd.Context(), cmd.OutOrStdout(), idle)
			}
			c, err := client.New(os.Getenv(envBenchWorkerURL), os.Getenv(envBenchWorkerKey), os.Getenv(envBenchWorkerSecret), client.WithRetries(0))
			if err != nil {
				return err
			}
			var mu sync.Mutex
			out := bufio.NewWriter(cmd.OutOrStdout())
			w, err := client.NewWorker(c, client.WorkerConfig{Concurrency: 64, Polls: 16, WorkerID: fmt.Sprintf("bench/%d", os.Getpid()),
				Handlers: map[string]client.Handler{benchWorkerModule: func(_ context.Context, t client.Task) (any, error) {
					held := time.Now().UnixNano()
					mu.Lock()
					fmt.Fprintf(out, "held %s %d\n", t.ExecutionID, held)
					out.Flush()
					mu.Unlock()
					return t.Input, nil
				}}})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			fmt.Fprintln(out, "ready")
			out.Flush()
			return w.Run(ctx)
		},
	}
	cmd.Flags().IntVar(&idle, "idle-polls", 0, "hold this many polls open for a module with no tasks instead of working")
	return cmd
}

// benchIdleModule is a module nobody submits: polls for it wait their whole waitMs.
const benchIdleModule = "bench.idle"

// holdIdlePolls sends n signed polls for benchIdleModule, each on a connection of its own,
// waiting 30 s, and exits when they have all been answered.
func holdIdlePolls(ctx context.Context, out io.Writer, n int) error {
	key, err := client.ParseSecret(os.Getenv(envBenchWorkerSecret))
	if err != nil {
		return err
	}
	base, apiKey := os.Getenv(envBenchWorkerURL), os.Getenv(envBenchWorkerKey)
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: true}}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Appendf(nil, `{"modules":[%q],"waitMs":30000,"workerId":"idle-%d"}`, benchIdleModule, i)
			path := fmt.Sprintf("/v1/sdk/tasks/poll?nonce=%d-%s", i, uuid.NewString()[:8])
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
			if err != nil {
				failed.Add(1)
				return
			}
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			req.Header.Set("X-Api-Key", apiKey)
			req.Header.Set("X-Sdk-Timestamp", ts)
			req.Header.Set("X-Sdk-Signature", client.Sign(key, http.MethodPost, path, ts, body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				failed.Add(1)
			}
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	fmt.Fprintln(out, "ready")
	wg.Wait()
	if failed.Load() > 0 {
		return fmt.Errorf("%d idle polls failed", failed.Load())
	}
	return nil
}

// benchIdlePolls measures what n polls waiting with nothing to lease cost the service (this
// process): heap and stacks per poll, and goroutines, while a child process holds them open.
func benchIdlePolls(ctx context.Context, out io.Writer, base string, key commands.APIKeyMinted, n int) error {
	before := memNow()
	goroutines := runtime.NumGoroutine()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "bench-worker", "--idle-polls", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), envBenchWorkerURL+"="+base, envBenchWorkerKey+"="+key.APIKey, envBenchWorkerSecret+"="+key.APISecret)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The polls wait once there are as many goroutines more as polls and the count has held
	// still for half a second (requests still being read add connection goroutines).
	deadline := time.Now().Add(60 * time.Second)
	for last, still := 0, 0; still < 5; {
		if time.Now().After(deadline) {
			return fmt.Errorf("idle polls: %d goroutines for %d polls after a minute", runtime.NumGoroutine()-goroutines, n)
		}
		time.Sleep(100 * time.Millisecond)
		now := runtime.NumGoroutine()
		if now >= goroutines+n && now == last {
			still++
		} else {
			still = 0
		}
		last = now
	}
	after := memNow()
	fmt.Fprintf(out, "worker idle polls: %d polls waiting: %.1f KiB each (heap %.1f KiB, stacks %.1f KiB), %.1f goroutines each\n", n,
		float64(after.total()-before.total())/float64(n)/1024, float64(after.heap-before.heap)/float64(n)/1024,
		float64(after.stack-before.stack)/float64(n)/1024, float64(runtime.NumGoroutine()-goroutines)/float64(n))
	return nil
}

type memFigures struct{ heap, stack int64 }

func (m memFigures) total() int64 { return m.heap + m.stack }

// memNow is the live heap and the stacks in use, after a collection.
func memNow() memFigures {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memFigures{heap: int64(ms.HeapAlloc), stack: int64(ms.StackInuse)}
}

// benchWorkerProc is the running worker process and when it held each execution's task.
type benchWorkerProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	held  map[string]time.Time
	ready chan struct{}
	done  chan struct{}
}

// startBenchWorker starts this binary's bench-worker against the service at base.
func startBenchWorker(base string, key commands.APIKeyMinted) (*benchWorkerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "bench-worker")
	cmd.Env = append(os.Environ(), envBenchWorkerURL+"="+base, envBenchWorkerKey+"="+key.APIKey, envBenchWorkerSecret+"="+key.APISecret)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &benchWorkerProc{cmd: cmd, held: map[string]time.Time{}, ready: make(chan struct{}), done: make(chan struct{})}
	go p.read(stdout)
	select {
	case <-p.ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("the bench worker process exited: %v", cmd.ProcessState)
	}
}

func (p *benchWorkerProc) read(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "ready":
			close(p.ready)
		case len(f) == 3 && f[0] == "held":
			if ns, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				p.mu.Lock()
				p.held[f[1]] = time.Unix(0, ns)
				p.mu.Unlock()
			}
		}
	}
	_ = p.cmd.Wait()
}

func (p *benchWorkerProc) heldAt(id string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.held[id]
	return t, ok
}

func (p *benchWorkerProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// benchWorkerPhase measures a workspace module run by a worker in another process: end-to-end
// executions/s against core.echo's in the same run, dispatch latency at --rate submits/s, and
// waitForMs latency one call at a time.
func benchWorkerPhase(ctx context.Context, out io.Writer, o benchOptions, a *app, workspace string, key commands.APIKeyMinted, base string, cs []*client.Client, counts executionCounts) error {
	if _, err := a.cmds.Modules.Register(ctx, commands.RegisterModule{WorkspaceID: workspace, Name: benchWorkerModule,
		Transport: commands.ModuleTransport{Type: "worker"}}); err != nil {
		return fmt.Errorf("register %s: %w", benchWorkerModule, err)
	}
	w, err := startBenchWorker(base, key)
	if err != nil {
		return err
	}
	defer w.stop()
	cost := startBenchCost(ctx, a, w.cmd.Process.Pid)
	builtin, err := benchE2E(ctx, cs, counts, o.clients, o.total, true)
	if err != nil {
		return fmt.Errorf("core.echo e2e: %w", err)
	}
	if err := benchDrain(ctx, a, []string{workspace}); err != nil {
		return err
	}
	builtinCost := cost.end(ctx, o.total)
	cost = startBenchCost(ctx, a, w.cmd.Process.Pid)
	viaWorker, err := benchE2EOf(ctx, cs, counts, o.clients, o.total, benchWorkerModule)
	if err != nil {
		return fmt.Errorf("worker e2e: %w", err)
	}
	if err := benchDrain(ctx, a, []string{workspace}); err != nil {
		return err
	}
	workerCost := cost.end(ctx, o.total)
	rb, rw := float64(o.total)/builtin.Seconds(), float64(o.total)/viaWorker.Seconds()
	fmt.Fprintf(out, "worker e2e: %d executions of %s through a worker process: %.0f executions/s; core.echo in the same run %.0f/s; ratio %.2f\n",
		o.total, benchWorkerModule, rw, rb, rw/rb)
	fmt.Fprintf(out, "worker e2e cost per execution: %s; core.echo: %s\n", workerCost, builtinCost)
	if err := benchIdlePolls(ctx, out, base, key, o.idlePolls); err != nil {
		return err
	}
	cost = startBenchCost(ctx, a, w.cmd.Process.Pid)
	lat, errs := benchDispatch(ctx, cs, w, o.rate, o.duration)
	if err := benchDrain(ctx, a, []string{workspace}); err != nil {
		return err
	}
	dispatchCost := cost.end(ctx, max(len(lat), 1))
	fmt.Fprintf(out, "worker dispatch: %d submits at %d/s, accepted until the worker holds the task: p50 %s, p90 %s, p99 %s, max %s (%s)\n",
		len(lat), o.rate, pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100), errs)
	fmt.Fprintf(out, "worker dispatch cost per execution: %s\n", dispatchCost)
	cost = startBenchCost(ctx, a, w.cmd.Process.Pid)
	builtinLat, _ := benchIdle(ctx, cs[0], o.idle)
	builtinCost = cost.end(ctx, o.idle)
	req := client.SubmitRequest{Module: benchWorkerModule, Input: map[string]int{"n": 1}, WaitForMs: 15000}
	cost = startBenchCost(ctx, a, w.cmd.Process.Pid)
	lat, errs = benchIdleOf(ctx, cs[0], o.idle, req)
	if err := benchDrain(ctx, a, []string{workspace}); err != nil {
		return err
	}
	workerCost = cost.end(ctx, o.idle)
	fmt.Fprintf(out, "worker idle: %d submits with waitForMs through the worker one at a time: p50 %s, p90 %s, p99 %s, max %s (%s); core.echo in the same run p50 %s\n",
		len(lat), pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100), errs, pct(builtinLat, 50))
	fmt.Fprintf(out, "worker idle cost per execution: %s; core.echo: %s\n", workerCost, builtinCost)
	return nil
}

// benchDispatch submits calls of the bench module at rate for d (open loop) and returns, for
// each, the time from its acceptance (the execution's createdAt) until the worker held it.
func benchDispatch(ctx context.Context, cs []*client.Client, w *benchWorkerProc, rate int, d time.Duration) ([]time.Duration, *errTally) {
	var mu sync.Mutex
	accepted := map[string]time.Time{}
	errs := &errTally{}
	openLoop(ctx, cs, rate, d, func(c *client.Client) {
		e, err := c.Submit(ctx, client.SubmitRequest{Module: benchWorkerModule, Input: map[string]string{"k": uuid.NewString()}})
		if err != nil {
			errs.add(err)
			return
		}
		mu.Lock()
		accepted[e.ID] = e.CreatedAt
		mu.Unlock()
	})
	var lat []time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for id, at := range accepted {
		for {
			if held, ok := w.heldAt(id); ok {
				lat = append(lat, held.Sub(at))
				break
			}
			if time.Now().After(deadline) {
				errs.add(fmt.Errorf("execution %s was never held by the worker", id))
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	slices.Sort(lat)
	return lat, errs
}

// benchCost is what a phase costs, per execution: the database's commits (pg_stat_database,
// which every backend updates within a second), this process's CPU (the service and the load)
// and the worker process's. On a shared machine these move less than rates do.
type benchCost struct {
	a                   *app
	pid                 int
	commits             int64
	self, worker        time.Duration
	commitsOK, workerOK bool
}

func startBenchCost(ctx context.Context, a *app, workerPid int) *benchCost {
	c := &benchCost{a: a, pid: workerPid}
	c.commits, c.commitsOK = dbCommits(ctx, a)
	c.self = selfCPU()
	c.worker, c.workerOK = procCPU(workerPid)
	return c
}

// benchCostFigures are a phase's costs per execution.
type benchCostFigures struct {
	commits             float64
	self, worker        time.Duration
	commitsOK, workerOK bool
}

func (f benchCostFigures) String() string {
	s := fmt.Sprintf("CPU %.2f ms here (service and load)", float64(f.self.Microseconds())/1000)
	if f.workerOK {
		s += fmt.Sprintf(", %.2f ms in the worker process", float64(f.worker.Microseconds())/1000)
	}
	if f.commitsOK {
		s += fmt.Sprintf(", %.2f commits", f.commits)
	}
	return s
}

// end waits for the backends' statistics to reach pg_stat_database and returns the phase's
// costs per execution, over n executions.
func (c *benchCost) end(ctx context.Context, n int) benchCostFigures {
	select {
	case <-ctx.Done():
	case <-time.After(1500 * time.Millisecond):
	}
	var f benchCostFigures
	commits, ok := dbCommits(ctx, c.a)
	f.commitsOK = ok && c.commitsOK
	f.commits = float64(commits-c.commits) / float64(n)
	f.self = (selfCPU() - c.self) / time.Duration(n)
	worker, ok := procCPU(c.pid)
	f.workerOK = ok && c.workerOK
	f.worker = (worker - c.worker) / time.Duration(n)
	return f
}

// dbCommits is the database's committed transactions so far.
func dbCommits(ctx context.Context, a *app) (int64, bool) {
	if a.pool == nil {
		return 0, false
	}
	var n int64
	if _, err := a.pool.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, false
	}
	if err := a.pool.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
		return 0, false
	}
	return n, true
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is process pid's CPU time so far, from /proc (Linux; false elsewhere).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, true
}
