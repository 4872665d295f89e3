package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/testenv"
)

// startWaits triggers n runs of wf with input and steps each once, so that each holds a WAIT
// stage waiting; callers run at once.
func startWaits(b *testing.B, cmds *commands.Commands, ws, wf string, n int, input string) []string {
	b.Helper()
	const callers = 32
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range callers {
		wg.Go(func() {
			ctx := context.Background()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				r, err := cmds.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wf, Input: []byte(input)})
				if err == nil {
					_, _, err = cmds.Workflows.StepRun(ctx, r[0].RunID, nil)
				}
				if err != nil {
					failed.Store(err)
					return
				}
				ids[i] = r[0].RunID
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	return ids
}

// anyWaits tells whether the read model holds a wait: a probe of one row, where counting them
// every few milliseconds while they end would compete with the appends being measured.
func anyWaits(b *testing.B, pool *pgxpool.Pool) bool {
	var any bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM run_waits)`).Scan(&any); err != nil {
		b.Fatal(err)
	}
	return any
}

func heapMB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

func openWaits(b *testing.B, q *projections.Queries) int {
	n, err := q.OpenWaits(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkWaiting100k puts 100,000 runs in a WAIT of an hour and reports the heap of the
// process with the scheduler leading over them: it holds only the waits due within its
// horizon (none here), read from the run_waits read model, not one per waiting stage
// (docs/performance.md, "Durable waits").
func BenchmarkWaiting100k(b *testing.B) {
	const n = 100_000
	env := testenv.New(b)
	ws := env.Workspace(b, 10)
	wf := create(b, env, ws, `{"name": "hold", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"for": "1h"}}], "edges": [{"from": "t", "to": "w"}]}`)
	cmds := commands.New(env.Store)
	s := scheduler.New(env.Store, cmds, env.Queries, scheduler.Config{Logger: quietLog(), WaitPoll: 100 * time.Millisecond})
	testenv.Go(b, s.Run)
	before := heapMB()
	for b.Loop() {
		start := time.Now()
		startWaits(b, cmds, ws, wf.ID, n, `{}`)
		b.ReportMetric(time.Since(start).Seconds(), "s-to-start")
		testenv.Eventually(b, 10*time.Minute, "the read model to hold every wait", func() bool { return openWaits(b, env.Queries) >= n })
	}
	// Let the lead poll a few times over the full read model before measuring.
	polled := time.Now().Add(time.Second)
	testenv.Eventually(b, 5*time.Second, "a few polls", func() bool { return time.Now().After(polled) })
	after := heapMB()
	b.ReportMetric(before, "heap-MB-before")
	b.ReportMetric(after, "heap-MB-100k-waiting")
	b.ReportMetric(float64(s.ArmedWaits()), "waits-in-memory")
	// The sweep (every SweepInterval) looks for runs that stopped moving; runs whose open
	// stages all wait are not among them, and finding that must not cost a look at each.
	start := time.Now()
	if _, err := env.Queries.UnfinishedRuns(context.Background(), time.Now(), 500); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "sweep-ms")
}

// BenchmarkTimersDueTogether puts 10,000 runs in a WAIT until the same instant and reports how
// late their stages completed after it: p50, p99 and max lateness of the completions' times
// (when each was decided), and p99 of when they were written (the append's transaction start,
// events.created_at) (docs/performance.md).
func BenchmarkTimersDueTogether(b *testing.B) {
	const n = 10_000
	env := testenv.New(b)
	ws := env.Workspace(b, 10)
	wf := create(b, env, ws, `{"name": "together", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "w", "module": "WAIT", "config": {"until": "payload.due"}}], "edges": [{"from": "t", "to": "w"}]}`)
	cmds := commands.New(env.Store)
	for b.Loop() {
		due := time.Now().Add(90 * time.Second).Truncate(time.Second)
		startWaits(b, cmds, ws, wf.ID, n, fmt.Sprintf(`{"due": %q}`, due.Format(time.RFC3339)))
		testenv.Eventually(b, 5*time.Minute, "the read model to hold every wait", func() bool { return openWaits(b, env.Queries) >= n })
		if time.Now().After(due.Add(-10 * time.Second)) {
			b.Fatalf("starting %d waits took past their due time less 10s: raise the margin", n)
		}
		stop := testenv.Go(b, scheduler.New(env.Store, cmds, env.Queries, scheduler.Config{Logger: quietLog(), Concurrency: benchConcurrency}).Run)
		testenv.Eventually(b, 5*time.Minute, "every wait to end", func() bool { return !anyWaits(b, env.Pool) })
		stop()
		rows, err := env.Pool.Query(context.Background(), `SELECT (data->>'at')::timestamptz, created_at FROM events
			WHERE type = 'RunStageCompleted' AND data->>'wait' = 'time'`)
		if err != nil {
			b.Fatal(err)
		}
		var late, written []time.Duration
		for rows.Next() {
			var at, wrote time.Time
			if err := rows.Scan(&at, &wrote); err != nil {
				b.Fatal(err)
			}
			late = append(late, at.Sub(due))
			written = append(written, wrote.Sub(due))
		}
		rows.Close()
		if len(late) != n {
			b.Fatalf("%d waits ended, want %d", len(late), n)
		}
		slices.Sort(late)
		slices.Sort(written)
		b.ReportMetric(ms(late[len(late)/2]), "late-p50-ms")
		b.ReportMetric(ms(late[len(late)*99/100]), "late-p99-ms")
		b.ReportMetric(ms(late[len(late)-1]), "late-max-ms")
		b.ReportMetric(ms(written[len(written)*99/100]), "written-p99-ms")
		if late[0] < 0 {
			b.Fatalf("a wait ended %s before its time", -late[0])
		}
	}
}

// benchConcurrency is the scheduler's Concurrency in BenchmarkTimersDueTogether: 0 takes the
// default (32); WAIT_BENCH_CONCURRENCY sets it.
var benchConcurrency = func() int {
	n, _ := strconv.Atoi(os.Getenv("WAIT_BENCH_CONCURRENCY"))
	return n
}()
