package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/testenv"
)

// BenchmarkForEach1000 times one run of a FOR_EACH over 1,000 items of core.echo, from the
// trigger to the run's end (docs/performance.md; target at most 5 s).
func BenchmarkForEach1000(b *testing.B) {
	const n = 1000
	env := testenv.New(b)
	ws := env.Workspace(b, 1_000_000)
	cmds := serveLike(b, env)
	wf := create(b, env, ws, forEach(n, 100, "core.echo"))
	for b.Loop() {
		start := time.Now()
		id := triggerWith(b, cmds, ws, wf, itemsInput(n))
		st := waitRun(b, env, id)
		if st.Status != run.StatusCompleted {
			b.Fatalf("run %s", st.Status)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/run")
	}
}

// BenchmarkForEach1000Gather is BenchmarkForEach1000 with config.body and a core.echo stage
// after the loop that gathers the 1,000 outputs (docs/performance.md; target at most 1 s).
func BenchmarkForEach1000Gather(b *testing.B) {
	const n = 1000
	env := testenv.New(b)
	ws := env.Workspace(b, 1_000_000)
	cmds := serveLike(b, env)
	wf := create(b, env, ws, fmt.Sprintf(`{"name": "gather-%d", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 100, "body": ["work"]}},
		{"id": "work", "module": "core.echo"}, {"id": "sum", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item"}},
		{"from": "work", "to": "sum"}]}`, n))
	for b.Loop() {
		start := time.Now()
		id := triggerWith(b, cmds, ws, wf, itemsInput(n))
		st := waitRun(b, env, id)
		if st.Status != run.StatusCompleted || len(st.Stages) != n+3 {
			b.Fatalf("run %s with %d stages, want COMPLETED with %d", st.Status, len(st.Stages), n+3)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/run")
	}
}

// BenchmarkLinearRuns runs a 3-stage linear workflow from several callers at once, each
// triggering a run and waiting for its end before the next (a closed loop, so the figure is
// the sustained rate rather than a backlog draining), and reports runs finished per second and
// the stage dispatch latency: from a stage's completion to the dispatch of the stage after it.
func BenchmarkLinearRuns(b *testing.B) {
	const runs, callers = 400, 16
	env := testenv.New(b)
	ws := env.Workspace(b, 1_000_000)
	cmds := serveLike(b, env)
	wf := create(b, env, ws, `{"name": "linear", "components": [
		{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"},
		{"id": "b", "module": "core.echo"}, {"id": "c", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "c"}]}`)
	for b.Loop() {
		start := time.Now()
		var (
			mu  sync.Mutex
			lat []time.Duration
			wg  sync.WaitGroup
		)
		for range callers {
			wg.Go(func() {
				for range runs / callers {
					st, err := runOnce(env, cmds, ws, wf.ID)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					lat = append(lat, dispatchLatencies(st)...)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		if len(lat) == 0 {
			b.Fatal("no run finished")
		}
		slices.Sort(lat)
		b.ReportMetric(float64(runs/callers*callers)/elapsed.Seconds(), "runs/s")
		b.ReportMetric(ms(lat[len(lat)/2]), "dispatch-p50-ms")
		b.ReportMetric(ms(lat[len(lat)*99/100]), "dispatch-p99-ms")
	}
}

// runOnce triggers a run and waits for its end on the run stream's revision.
func runOnce(env *testenv.Env, cmds *commands.Commands, ws, workflowID string) (run.State, error) {
	ctx := context.Background()
	r, err := cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: workflowID})
	if err != nil {
		return run.State{}, err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		st, err := env.Cmds.Workflows.Run(ctx, r[0].RunID)
		if err != nil || st.Status.Terminal() {
			return st, err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return run.State{}, fmt.Errorf("run %s did not end within a minute", r[0].RunID)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// dispatchLatencies is, for each stage after the first module stage, the time from its
// upstream's completion to its dispatch.
func dispatchLatencies(st run.State) []time.Duration {
	var out []time.Duration
	for i := 2; i < len(st.Stages); i++ {
		out = append(out, st.Stages[i].DispatchedAt.Sub(st.Stages[i-1].UpdatedAt))
	}
	return out
}
