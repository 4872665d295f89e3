package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/testdb"
)

// executionEvents makes a random log of n executions' lives (retries, failures, completions,
// some cut short), interleaved as concurrent executions are, plus events of an execution whose
// row was made before the log starts and of one that has no row at all.
func executionEvents(t *testing.T, rng *rand.Rand, n int, existing, unknown string) []eventstore.RecordedEvent {
	t.Helper()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tick := func() time.Time { at = at.Add(time.Duration(rng.IntN(900)+1) * time.Millisecond); return at }
	lives := make([][]domain.Event, 0, n+2)
	life := func(id string, submitted bool) []domain.Event {
		var evs []domain.Event
		if submitted {
			evs = append(evs, execution.Submitted{ExecutionID: id, WorkspaceID: "ws-" + fmt.Sprint(rng.IntN(3)), Module: "core.echo",
				Attempts: 3, CachedFrom: []string{"", uuid.NewString()}[rng.IntN(2)], RunID: []string{"", uuid.NewString()}[rng.IntN(2)], At: tick()})
		}
		if submitted && rng.IntN(5) == 0 { // run first: completed with no claim before it
			return append(evs, execution.Completed{ExecutionID: id, Attempt: 1, Output: json.RawMessage(`{}`), TotalUsage: billing.FromWhole(1), At: tick()})
		}
		steps := rng.IntN(5)
		for attempt := 1; attempt <= steps; attempt++ {
			evs = append(evs, execution.Started{ExecutionID: id, Attempt: attempt, Worker: "w", LeaseUntil: tick().Add(time.Minute), At: tick()})
			if rng.IntN(3) == 0 { // a worker's heartbeat
				evs = append(evs, execution.LeaseExtended{ExecutionID: id, Attempt: attempt, LeaseUntil: tick().Add(time.Minute), At: tick()})
			}
			switch r := rng.IntN(4); {
			case r == 0 && attempt < steps:
				evs = append(evs, execution.AttemptFailed{ExecutionID: id, Attempt: attempt, Error: json.RawMessage(`{"code":"x"}`), RetryAt: tick().Add(time.Second), At: tick()})
			case r == 1:
				return append(evs, execution.Failed{ExecutionID: id, Attempt: attempt, Error: json.RawMessage(`{"code":"final"}`), At: tick()})
			case r == 2:
				return append(evs, execution.Completed{ExecutionID: id, Attempt: attempt, Output: json.RawMessage(`{}`), TotalUsage: billing.FromWhole(1), At: tick()})
			}
		}
		return evs
	}
	for range n {
		lives = append(lives, life(uuid.NewString(), true))
	}
	lives = append(lives, life(existing, rng.IntN(2) == 0), life(unknown, false))
	return interleave(t, rng, lives)
}

// interleave merges lives into one log, each life's events in order, as concurrent
// executions' events are.
func interleave(t *testing.T, rng *rand.Rand, lives [][]domain.Event) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	for pos := uint64(1); ; pos++ {
		var open []int
		for i, l := range lives {
			if len(l) > 0 {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			return out
		}
		i := open[rng.IntN(len(open))]
		e := lives[i][0]
		lives[i] = lives[i][1:]
		data, err := domain.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, eventstore.RecordedEvent{Type: e.EventType(), Data: data, Position: eventstore.Position{Commit: pos, Prepare: pos}})
	}
}

// webhookEvents makes a random log of n executions, most with a callback, each ending and
// then going through delivery attempts, failures, replays and deliveries.
func webhookEvents(t *testing.T, rng *rand.Rand, n int) []eventstore.RecordedEvent {
	t.Helper()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tick := func() time.Time { at = at.Add(time.Duration(rng.IntN(900)+1) * time.Millisecond); return at }
	lives := make([][]domain.Event, 0, n)
	for range n {
		id := uuid.NewString()
		sub := execution.Submitted{ExecutionID: id, WorkspaceID: "ws", Module: "core.echo", Attempts: 1, At: tick()}
		if rng.IntN(3) > 0 {
			sub.Callback.URL = "https://example.com/hook"
		}
		evs := []domain.Event{sub, execution.Started{ExecutionID: id, Attempt: 1, Worker: "w", LeaseUntil: tick(), At: tick()}}
		if rng.IntN(2) == 0 {
			evs = append(evs, execution.Completed{ExecutionID: id, Attempt: 1, Output: json.RawMessage(`{}`), At: tick()})
		} else {
			evs = append(evs, execution.Failed{ExecutionID: id, Attempt: 1, Error: json.RawMessage(`{"code":"x"}`), At: tick()})
		}
		for attempt := 1; attempt <= rng.IntN(4); attempt++ {
			evs = append(evs, execution.WebhookAttemptStarted{ExecutionID: id, Attempt: attempt, Worker: "w", LeaseUntil: tick().Add(time.Minute), At: tick()})
			switch rng.IntN(4) {
			case 0:
				evs = append(evs, execution.WebhookDelivered{ExecutionID: id, Attempt: attempt, Worker: "w", StatusCode: 200, At: tick()})
			case 1:
				evs = append(evs, execution.WebhookAttemptFailed{ExecutionID: id, Attempt: attempt, Worker: "w", Error: json.RawMessage(`{}`), Final: true, At: tick()})
			case 2:
				evs = append(evs, execution.WebhookAttemptFailed{ExecutionID: id, Attempt: attempt, Worker: "w", Error: json.RawMessage(`{}`), RetryAt: tick().Add(time.Second), At: tick()})
			default:
				evs = append(evs, execution.WebhookReplayRequested{ExecutionID: id, At: tick()})
			}
		}
		lives = append(lives, evs)
	}
	// A few lives at a time, so that an execution's terminal event and its delivery events
	// often fall into one batch, where their order matters.
	var out []eventstore.RecordedEvent
	for chunk := range slices.Chunk(lives, 4) {
		out = append(out, interleave(t, rng, chunk)...)
	}
	for i := range out {
		out[i].Position = eventstore.Position{Commit: uint64(i + 1), Prepare: uint64(i + 1)}
	}
	return out
}

func executionsTable(t *testing.T, pool *pgxpool.Pool, existing string) {
	t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Executions{}.Migrate(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO executions (id, workspace_id, module, status, attempts, total_usage, error, created_at, updated_at)
		VALUES ($1, 'ws-old', 'core.jq', 'RUNNING', 2, 5, '{"old":true}', '2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z')`, existing); err != nil {
		t.Fatal(err)
	}
}

// tableRows lists table's rows as text, in a stable order.
func tableRows(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT r::text FROM `+table+` r ORDER BY r::text`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// applyInTx applies events in one projector transaction, through ApplyBatch or event by event.
func applyInTx(t *testing.T, pool *pgxpool.Pool, p Projector, events []eventstore.RecordedEvent, batch bool) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		if batch {
			_, _, err = applyBatch(ctx, tx, p, events, eventstore.Position{})
		} else {
			_, _, err = applyEvents(ctx, tx, p, events, eventstore.Position{})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestApplyBatchEqualsApply: a projector's tables after a log applied in batches of random
// sizes (as the live projector and a rebuild do) equal its tables after the same log applied
// event by event, row for row.
func TestApplyBatchEqualsApply(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("executions seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			existing, unknown := uuid.NewString(), uuid.NewString()
			events := executionEvents(t, rng, 60, existing, unknown)
			checkBatchesEqualEvents(t, rng, Executions{}, events, func(pool *pgxpool.Pool) { executionsTable(t, pool, existing) })
		})
		t.Run(fmt.Sprint("webhooks seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			checkBatchesEqualEvents(t, rng, Webhooks{}, webhookEvents(t, rng, 80), func(pool *pgxpool.Pool) {
				ctx := context.Background()
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Webhooks{}.Migrate(ctx, tx) }); err != nil {
					t.Fatal(err)
				}
			})
		})
		t.Run(fmt.Sprint("billing seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			checkBatchesEqualEvents(t, rng, Billing{}, billingEvents(t, rng, 300), func(pool *pgxpool.Pool) {
				ctx := context.Background()
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Billing{}.Migrate(ctx, tx) }); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

func checkBatchesEqualEvents(t *testing.T, rng *rand.Rand, p Projector, events []eventstore.RecordedEvent, setup func(*pgxpool.Pool)) {
	t.Helper()
	one, _ := testdb.NewPool(t)
	batched, _ := testdb.NewPool(t)
	setup(one)
	setup(batched)
	for _, ev := range events {
		applyInTx(t, one, p, []eventstore.RecordedEvent{ev}, false)
	}
	for rest := events; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(40))
		applyInTx(t, batched, p, rest[:n], true)
		rest = rest[n:]
	}
	for _, table := range p.Tables() {
		want, got := tableRows(t, one, table), tableRows(t, batched, table)
		if len(want) < 3 {
			t.Fatalf("%s: only %d rows to compare", table, len(want))
		}
		if !reflect.DeepEqual(want, got) {
			for i := range min(len(want), len(got)) {
				if want[i] != got[i] {
					t.Fatalf("%s row %d differs:\nevent by event %s\nin batches     %s", table, i, want[i], got[i])
				}
			}
			t.Fatalf("%s: %d rows event by event, %d in batches", table, len(want), len(got))
		}
	}
}

// billingEvents makes a random billing log of three workspaces: purchases, renewals and
// charges the balance covers, each with its stream's next revision.
func billingEvents(t *testing.T, rng *rand.Rand, n int) []eventstore.RecordedEvent {
	t.Helper()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	revisions := map[string]uint64{}
	var out []eventstore.RecordedEvent
	for i := range n {
		ws := fmt.Sprint("ws-", rng.IntN(3))
		at = at.Add(time.Second)
		var e domain.Event
		switch r := rng.IntN(10); {
		case r < 3:
			e = billing.CreditsPurchased{WorkspaceID: ws, Amount: billing.FromWhole(int64(1 + rng.IntN(20))), Reference: fmt.Sprint("ref-", i), At: at}
		case r < 4:
			e = billing.PlanRenewed{WorkspaceID: ws, Included: billing.FromWhole(10), Lapsed: billing.FromWhole(int64(rng.IntN(3))), At: at}
		default:
			// Charges take from usage, from credit or both, so usage runs on between renewals.
			fromUsage := billing.FromWhole(int64(rng.IntN(2)))
			e = billing.CreditsCharged{WorkspaceID: ws, Cause: fmt.Sprint("execution-", i), Amount: billing.FromWhole(2), FromUsage: fromUsage, FromCredit: billing.FromWhole(2) - fromUsage, At: at}
		}
		data, err := domain.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		pos := uint64(i + 1)
		out = append(out, eventstore.RecordedEvent{ID: uuid.New(), Stream: "billing-" + ws, Revision: revisions[ws], Type: e.EventType(), Data: data,
			Position: eventstore.Position{Commit: pos, Prepare: pos}, CreatedAt: at})
		revisions[ws]++
	}
	return out
}
