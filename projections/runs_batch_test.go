package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/runnotify"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/testdb"
)

// runEvents makes a random log of n runs' lives, interleaved: some in a concurrency queue and
// admitted, stages dispatched (some skipped), started, waiting, completed or failed, events
// late after the end (a run's clock is not the log's order, so times go back too), plus the
// events of a run whose row was made before the log starts (CREATED or EXECUTING) and of one
// that has no row.
func runEvents(t *testing.T, rng *rand.Rand, n int, existing []string, unknown string) [][]domain.Event {
	t.Helper()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tick := func() time.Time {
		at = at.Add(time.Duration(rng.IntN(900)+1) * time.Millisecond)
		if rng.IntN(4) == 0 {
			return at.Add(-time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		return at
	}
	life := func(id string, triggered bool) []domain.Event {
		var evs []domain.Event
		if triggered {
			def := workflow.Definition{Name: "w"}
			if rng.IntN(3) == 0 {
				def.Concurrency = &workflow.Concurrency{Key: "k", Limit: 1}
			}
			evs = append(evs, run.Triggered{RunID: id, WorkflowID: "wf-" + fmt.Sprint(rng.IntN(3)), WorkspaceID: "ws",
				TriggerID: "t", Definition: def, Input: json.RawMessage(`{}`), ConcurrencyKey: "k", At: tick()})
		}
		if rng.IntN(3) == 0 {
			evs = append(evs, run.Admitted{RunID: id, QueueID: "q", At: tick()})
		}
		var open []string
		dispatch := func() run.StagesDispatched {
			var ds []run.Dispatch
			for range 1 + rng.IntN(3) {
				sid := uuid.NewString()
				d := run.Dispatch{StageID: sid, ComponentID: "c", Skipped: rng.IntN(4) == 0}
				if !d.Skipped {
					open = append(open, sid)
				}
				ds = append(ds, d)
			}
			return run.StagesDispatched{RunID: id, Stages: ds, At: tick()}
		}
		for range rng.IntN(6) {
			switch r := rng.IntN(7); {
			case r < 2 || len(open) == 0:
				evs = append(evs, dispatch())
			case r == 2:
				evs = append(evs, run.StageStarted{RunID: id, StageID: open[0], Attempt: 1, At: tick()})
			case r == 3:
				until := tick().Add(time.Hour)
				evs = append(evs, run.StageWaiting{RunID: id, StageID: open[0], WaitingFor: run.WaitingFor{Kind: "for", Until: &until}, At: tick()})
			case r == 4:
				end := run.StageCompleted{RunID: id, StageID: open[0], Output: json.RawMessage(`{}`),
					Wait: []string{"", "time"}[rng.IntN(2)], At: tick()}
				open = open[1:]
				if rng.IntN(2) == 0 { // the dispatch it led to, written inside it
					d := dispatch()
					end.Then = &d
				}
				evs = append(evs, end)
			case r == 5:
				evs = append(evs, run.StageFailed{RunID: id, StageID: open[0], Error: json.RawMessage(`{}`), At: tick()})
				open = open[1:]
			default:
				// more completions than stages open: open_stages stays at 0
				evs = append(evs, run.StageCompleted{RunID: id, StageID: uuid.NewString(), Output: json.RawMessage(`{}`), At: tick()})
			}
		}
		if rng.IntN(3) > 0 {
			evs = append(evs, run.Finished{RunID: id, Status: []run.Status{run.StatusCompleted, run.StatusFailed}[rng.IntN(2)], At: tick()})
			if rng.IntN(3) == 0 { // late: a stage's events after the run ended
				sid := uuid.NewString()
				evs = append(evs, run.StagesDispatched{RunID: id, Stages: []run.Dispatch{{StageID: sid}}, At: tick()},
					run.StageCompleted{RunID: id, StageID: sid, Output: json.RawMessage(`{}`), At: tick()})
			}
		}
		return evs
	}
	lives := make([][]domain.Event, 0, n+len(existing)+1)
	for range n {
		lives = append(lives, life(uuid.NewString(), true))
	}
	for _, id := range existing {
		lives = append(lives, life(id, rng.IntN(2) == 0)) // a Triggered for a row that exists: left alone
	}
	return append(lives, life(unknown, false))
}

func runsTables(t *testing.T, pool *pgxpool.Pool, existing []string) {
	t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Runs{}.Migrate(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	for i, id := range existing {
		if _, err := pool.Exec(ctx, `INSERT INTO runs (id, workspace_id, workflow_id, status, created_at, updated_at, queue_id, open_stages)
			VALUES ($1, 'ws-old', 'wf-old', $2, '2026-11-01T00:00:00Z', '2026-11-22T12:00:05Z', 'q-old', 2)`,
			id, []string{"CREATED", "EXECUTING"}[i%2]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunsApplyBatchEqualsApply: the runs projector's tables after a log applied in batches
// of random sizes equal its tables after the same log applied event by event, row for row.
func TestRunsApplyBatchEqualsApply(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			var existing []string
			for range 12 {
				existing = append(existing, uuid.NewString())
			}
			// Few lives at a time, so that a run's events often share a batch.
			var events = interleaveChunks(t, rng, runEvents(t, rng, 80, existing, uuid.NewString()), 4)
			checkBatchesEqualEvents(t, rng, Runs{}, events, func(pool *pgxpool.Pool) { runsTables(t, pool, existing) })
		})
	}
}

func interleaveChunks(t *testing.T, rng *rand.Rand, lives [][]domain.Event, size int) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	for i := 0; i < len(lives); i += size {
		out = append(out, interleave(t, rng, lives[i:min(i+size, len(lives))])...)
	}
	for i := range out {
		out[i].Position.Commit, out[i].Position.Prepare = uint64(i+1), uint64(i+1)
	}
	return out
}

// A row CREATED before the batch whose first dispatch comes after an event later in time: the
// dispatch sets updated_at to its own time, lowering it, as Apply's statements do.
func TestRunsApplyBatchFirstDispatchOfACreatedRow(t *testing.T) {
	existing := []string{uuid.NewString(), uuid.NewString()} // CREATED, EXECUTING
	t0 := time.Date(2026, 11, 22, 12, 0, 10, 0, time.UTC)
	var lives [][]domain.Event
	for _, id := range existing {
		lives = append(lives, []domain.Event{
			run.Admitted{RunID: id, QueueID: "q", At: t0.Add(5 * time.Second)},
			run.StagesDispatched{RunID: id, Stages: []run.Dispatch{{StageID: uuid.NewString()}}, At: t0},
		})
	}
	var events []eventstore.RecordedEvent
	for _, l := range lives {
		events = append(events, interleave(t, rand.New(rand.NewPCG(1, 1)), [][]domain.Event{l})...)
	}
	one, _ := testdb.NewPool(t)
	batched, _ := testdb.NewPool(t)
	runsTables(t, one, existing)
	runsTables(t, batched, existing)
	for _, ev := range events {
		applyInTx(t, one, Runs{}, []eventstore.RecordedEvent{ev}, false)
	}
	applyInTx(t, batched, Runs{}, events, true)
	want, got := tableRows(t, one, "runs"), tableRows(t, batched, "runs")
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("event by event %v\nin one batch   %v", want, got)
	}
	if !slices.ContainsFunc(want, func(r string) bool {
		return strings.Contains(r, "EXECUTING,\"2026-11-01 00:00:00+00\",\"2026-11-22 12:00:10+00\"")
	}) {
		t.Fatalf("no row lowered to its dispatch's time: %v", want)
	}
}

// TestRunNotifyApplyBatchEqualsApply: the same for the run notifications projector, over runs
// with and without a notify, their ends, attempts, deliveries, failures and replays.
func TestRunNotifyApplyBatchEqualsApply(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 19))
			at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			tick := func() time.Time { at = at.Add(time.Duration(rng.IntN(900)+1) * time.Millisecond); return at }
			var lives [][]domain.Event
			for range 60 {
				id := uuid.NewString()
				def := workflow.Definition{Name: "w"}
				if rng.IntN(3) > 0 {
					def.Notify = &workflow.Notify{URL: "https://example.com/hook"}
				}
				evs := []domain.Event{run.Triggered{RunID: id, WorkflowID: "wf", WorkspaceID: "ws", TriggerID: "t", Definition: def, At: tick()},
					run.Finished{RunID: id, Status: run.StatusCompleted, At: tick()}}
				for attempt := 1; attempt <= rng.IntN(4); attempt++ {
					evs = append(evs, runnotify.AttemptStarted{RunID: id, Attempt: attempt, Worker: "w", LeaseUntil: tick().Add(time.Minute), At: tick()})
					switch rng.IntN(4) {
					case 0:
						evs = append(evs, runnotify.Delivered{RunID: id, Attempt: attempt, Worker: "w", StatusCode: 200, At: tick()})
					case 1:
						evs = append(evs, runnotify.AttemptFailed{RunID: id, Attempt: attempt, Worker: "w", Error: json.RawMessage(`{}`), Final: true, At: tick()})
					case 2:
						evs = append(evs, runnotify.AttemptFailed{RunID: id, Attempt: attempt, Worker: "w", Error: json.RawMessage(`{}`), RetryAt: tick().Add(time.Second), At: tick()})
					default:
						evs = append(evs, runnotify.ReplayRequested{RunID: id, At: tick()})
					}
				}
				lives = append(lives, evs)
			}
			checkBatchesEqualEvents(t, rng, RunNotify{}, interleaveChunks(t, rng, lives, 4), func(pool *pgxpool.Pool) {
				ctx := context.Background()
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return RunNotify{}.Migrate(ctx, tx) }); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
