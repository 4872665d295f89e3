package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
)

// benchRunStages is how many core.echo stages a bench run has.
const benchRunStages = 3

// benchRunDef is the runs phase's workflow: ON_API_CALLED → a → b → c, each a core.echo, the
// run issue 29 measures.
const benchRunDef = `{"name": %q, "components": [
	{"id": "t", "module": "ON_API_CALLED", "position": [0, 0]},
	{"id": "a", "module": "core.echo", "position": [200, 0]},
	{"id": "b", "module": "core.echo", "position": [400, 0]},
	{"id": "c", "module": "core.echo", "position": [600, 0]}],
  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "c"}]}`

// benchRunsPhase creates the three-stage workflow in the bench workspace and measures its runs,
// trigger to COMPLETED: first --idle runs one at a time (latency percentiles), then --runs runs
// by --clients callers (stages/s, and its ratio to e2e's executions/s when e2e ran before).
func benchRunsPhase(ctx context.Context, out io.Writer, o benchOptions, a *app, workspace string, cs []*client.Client, e2eRate float64) error {
	var def workflow.Definition
	if err := json.Unmarshal(fmt.Appendf(nil, benchRunDef, "bench runs "+uuid.NewString()[:8]), &def); err != nil {
		return fmt.Errorf("bench workflow: %w", err)
	}
	wf, err := a.cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: workspace, Definition: def})
	if err != nil {
		return fmt.Errorf("create bench workflow: %w", err)
	}
	lat, errs := benchRunsIdle(ctx, cs[0], wf.ID, o.idle)
	fmt.Fprintf(out, "runs idle: %d runs of %d core.echo stages one at a time, trigger to COMPLETED: p50 %s, p90 %s, p99 %s, max %s (%s)\n",
		len(lat), benchRunStages, pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100), errs)
	n, took, errs := benchRunsLoad(ctx, cs, wf.ID, o.clients, o.runs)
	stages := float64(n*benchRunStages) / took.Seconds()
	ratio := "no e2e phase before it to compare with"
	if e2eRate > 0 {
		ratio = fmt.Sprintf("%.2f of e2e's %.0f executions/s", stages/e2eRate, e2eRate)
	}
	fmt.Fprintf(out, "runs: %d runs COMPLETED in %s with %d clients: %.0f runs/s, %.0f stages/s, %s (%s)\n",
		n, took.Round(time.Millisecond), o.clients, float64(n)/took.Seconds(), stages, ratio, errs)
	return nil
}

// benchRun triggers one run and follows its stream until it ends; an end other than
// COMPLETED is an error.
func benchRun(ctx context.Context, c *client.Client, workflowID string) error {
	runs, err := c.TriggerWorkflow(ctx, workflowID, map[string]int{"n": 1})
	if err != nil {
		return err
	}
	if len(runs) != 1 {
		return fmt.Errorf("trigger answered %d runs, want 1", len(runs))
	}
	ev, err := c.WaitForRun(ctx, runs[0].RunID, nil)
	if err != nil {
		return err
	}
	if ev.Status != client.StatusCompleted {
		return fmt.Errorf("run %s ended %s", runs[0].RunID, ev.Status)
	}
	return nil
}

// benchRunsIdle runs n runs one after the other and returns their latencies, sorted.
func benchRunsIdle(ctx context.Context, c *client.Client, workflowID string, n int) ([]time.Duration, *errTally) {
	var lat []time.Duration
	errs := &errTally{}
	for range n {
		start := time.Now()
		if err := benchRun(ctx, c, workflowID); err != nil {
			errs.add(err)
			continue
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat, errs
}

// benchRunsLoad has clients callers run total runs between them, each waiting for its run to
// end before triggering the next, and returns how many COMPLETED and how long it took.
func benchRunsLoad(ctx context.Context, cs []*client.Client, workflowID string, clients, total int) (int, time.Duration, *errTally) {
	errs := &errTally{}
	var done, next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		c := cs[i%len(cs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= int64(total) && ctx.Err() == nil; n = next.Add(1) {
				if err := benchRun(ctx, c, workflowID); err != nil {
					errs.add(err)
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(done.Load()), time.Since(start), errs
}
