package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/testenv"
)

type env struct {
	pool  *pgxpool.Pool
	store eventstore.Store
	cmds  *commands.Commands
	q     *projections.Queries
}

func newEnv(t *testing.T) env {
	t.Helper()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := projections.Migrate(ctx, pool, projections.All()); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.New(ctx, pool, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return env{pool: pool, store: store, cmds: commands.New(store), q: projections.NewQueries(pool)}
}

// startEngine runs an engine until the test ends or the returned stop is called.
func (e env) startEngine(t *testing.T) (*projections.Engine, context.CancelFunc) {
	t.Helper()
	return e.startEngineWith(t, projections.EngineConfig{})
}

// startEngineWith is startEngine with cfg (its RetryBackoff 10 ms).
func (e env) startEngineWith(t *testing.T, cfg projections.EngineConfig) (*projections.Engine, context.CancelFunc) {
	t.Helper()
	cfg.RetryBackoff = 10 * time.Millisecond
	eng, err := projections.NewEngine(e.pool, e.store, projections.All(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
	}
	t.Cleanup(func() {
		select {
		case <-ctx.Done():
		default:
			stop()
		}
	})
	return eng, stop
}

// caughtUp waits until every projector has applied the log up to its head.
func (e env) caughtUp(t *testing.T, eng *projections.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range eng.Projectors() {
		head := lastMatching(t, e.store, p.Filter())
		if head.IsStart() {
			continue
		}
		if err := eng.WaitFor(ctx, p.Name(), head); err != nil {
			t.Fatalf("projector %s did not catch up: %v", p.Name(), err)
		}
	}
}

func lastMatching(t *testing.T, s eventstore.Store, f eventstore.Filter) eventstore.Position {
	t.Helper()
	pos := eventstore.Start
	for {
		evs, err := s.ReadAll(context.Background(), pos, 1000, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return pos
		}
		pos = evs[len(evs)-1].Position
	}
}

// seed makes users, workspaces and a random billing history.
func (e env) seed(t *testing.T, rng *rand.Rand, workspaces, billingOps int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range workspaces {
		email := fmt.Sprintf("owner%d-%s@example.com", i, uuid.NewString()[:8])
		if _, err := e.cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: "password-123", Name: fmt.Sprint("Owner ", i)}); err != nil {
			t.Fatal(err)
		}
		id, err := e.cmds.Workspaces.CreateWorkspace(ctx, fmt.Sprint("Workspace ", i), email)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i := range billingOps {
		ws := ids[rng.IntN(len(ids))]
		var err error
		switch rng.IntN(3) {
		case 0:
			_, err = e.cmds.Billing.TopUp(ctx, ws, billing.Credits(rng.IntN(50_000)+1), fmt.Sprint("ref-", i))
		case 1:
			_, err = e.cmds.Billing.RenewPlan(ctx, ws, billing.Credits(rng.IntN(20_000)))
		default:
			bal, berr := e.cmds.Billing.Balance(ctx, ws)
			if berr != nil {
				t.Fatal(berr)
			}
			if bal.Total() > 0 {
				_, err = e.cmds.Billing.Charge(ctx, ws, fmt.Sprint("execution-", i), billing.Credits(rng.Int64N(int64(bal.Total()))+1))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func TestRebuildReproducesTablesRowForRow(t *testing.T) {
	e := newEnv(t)
	eng, _ := e.startEngine(t)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := e.seed(t, rng, 4, 300)
	e.caughtUp(t, eng)
	before := testenv.ReadModel(t, e.pool)
	if len(before["billing_transactions"]) == 0 || len(before["users"]) != 4 || len(before["memberships"]) != 4 {
		t.Fatalf("seed produced too little to compare: %d tx, %d users", len(before["billing_transactions"]), len(before["users"]))
	}
	for _, p := range eng.Projectors() {
		var progress []projections.RebuildProgress
		if err := eng.Rebuild(context.Background(), p.Name(), func(r projections.RebuildProgress) { progress = append(progress, r) }); err != nil {
			t.Fatalf("rebuild %s: %v", p.Name(), err)
		}
		if len(progress) == 0 || !progress[len(progress)-1].Done {
			t.Fatalf("rebuild %s reported no completion: %+v", p.Name(), progress)
		}
	}
	after := testenv.ReadModel(t, e.pool)
	for _, d := range testenv.ReadModelDiff(before, after) {
		t.Errorf("after rebuild: %s", d)
	}
	// The live projector keeps working on the swapped-in tables.
	if _, err := e.cmds.Billing.TopUp(context.Background(), ids[0], billing.FromWhole(7), "after-rebuild"); err != nil {
		t.Fatal(err)
	}
	e.caughtUp(t, eng)
	rep, err := projections.AuditBilling(context.Background(), e.store, e.q, ids[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.Behind {
		t.Fatalf("audit after rebuild and new event: %v (behind %v)", rep.Differences, rep.Behind)
	}
	var n int
	e.pool.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'rebuild_%'`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d shadow schemas left behind", n)
	}
}

func TestBillingAuditCleanThenTampered(t *testing.T) {
	e := newEnv(t)
	eng, _ := e.startEngine(t)
	ids := e.seed(t, rand.New(rand.NewPCG(7, 9)), 3, 200)
	e.caughtUp(t, eng)
	ctx := context.Background()
	for _, ws := range ids {
		rep, err := projections.AuditBilling(ctx, e.store, e.q, ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Clean() {
			t.Fatalf("workspace %s: %v", ws, rep.Differences)
		}
		folded, _ := e.cmds.Billing.Balance(ctx, ws)
		if rep.Folded.Credit != folded.Credit || rep.Folded.Usage != folded.Usage {
			t.Fatalf("audit fold %+v, command fold credit %s usage %s", rep.Folded, folded.Credit, folded.Usage)
		}
	}
	if _, err := e.pool.Exec(ctx, `UPDATE balances SET credit = credit + 1 WHERE workspace_id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	rep, _ := projections.AuditBilling(ctx, e.store, e.q, ids[1], nil)
	if rep.Clean() {
		t.Fatal("audit clean after the balance was tampered with")
	}
	if _, err := e.pool.Exec(ctx, `DELETE FROM billing_transactions WHERE workspace_id = $1 AND revision = 0`, ids[2]); err != nil {
		t.Fatal(err)
	}
	rep, _ = projections.AuditBilling(ctx, e.store, e.q, ids[2], nil)
	if rep.Clean() {
		t.Fatal("audit clean after a history row was deleted")
	}
}

func TestUndecodableEventStopsProjectorAndFailsReadiness(t *testing.T) {
	e := newEnv(t)
	eng, _ := e.startEngine(t)
	ctx := context.Background()
	ids := e.seed(t, rand.New(rand.NewPCG(3, 4)), 1, 3)
	e.caughtUp(t, eng)
	if err := eng.Ready(ctx); err != nil {
		t.Fatalf("ready before the bad event: %v", err)
	}
	bad := eventstore.EventData{ID: uuid.New(), Type: billing.CreditsPurchased{}.EventType(), Data: []byte(`{"workspaceId":"x","amount":"lots"}`)}
	res, err := e.store.Append(ctx, "billing-"+ids[0], eventstore.Any(), bad)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(billing.CreditsPurchased{WorkspaceID: ids[0], Amount: 5})
	if _, err := e.store.Append(ctx, "billing-"+ids[0], eventstore.Any(), eventstore.EventData{ID: uuid.New(), Type: "CreditsPurchased", Data: good}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for eng.Ready(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatal("readiness stayed green after an undecodable event")
		}
		waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		<-waitCtx.Done()
		cancel()
	}
	if err := eng.Ready(ctx); !strings.Contains(err.Error(), "billing") {
		t.Fatalf("readiness error does not name the projector: %v", err)
	}
	st, err := eng.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name != "billing" {
			continue
		}
		if s.Error == "" || !s.Position.Less(res.Position) || s.Lag < 2 {
			t.Fatalf("billing status %+v: want an error, a position before the bad event and lag >= 2", s)
		}
	}
}

// running is how many projectors reg's engine runs, by name.
func running(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_projection_running" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "projector" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// Each projector runs in one of two engines at a time; when one stops, the other takes its
// projectors over and applies what came after.
func TestOneInstancePerProjectorAndFailover(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	_, stopA := e.startEngineWith(t, projections.EngineConfig{Registerer: regA})
	engB, _ := e.startEngineWith(t, projections.EngineConfig{Registerer: regB})
	ids := e.seed(t, rand.New(rand.NewPCG(5, 6)), 1, 20)
	e.caughtUp(t, engB)
	n := len(projections.All())
	// wantRunning waits until every projector runs in exactly one engine, B running wantB of
	// them, and the database shows one granted advisory lock per projector and none waited for
	// inside a statement (a standby asks again between statements: no snapshot held).
	wantRunning := func(wantB int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var g, w int
			err := e.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
				FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&g, &w)
			if err != nil {
				t.Fatal(err)
			}
			a, b := running(t, regA), running(t, regB)
			once, inB := 0, 0
			for _, p := range projections.All() {
				if a[p.Name()]+b[p.Name()] == 1 {
					once++
				}
				inB += int(b[p.Name()])
			}
			if g == n && w == 0 && once == n && (wantB < 0 || inB == wantB) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("advisory locks: %d granted, %d waiting; %d of %d projectors run in exactly one engine, %d in B (want %d)",
					g, w, once, n, inB, wantB)
			}
			time.Sleep(10 * time.Millisecond) // polling pg_locks and gauges: there is no event to wait on
		}
	}
	wantRunning(-1)
	stopA()
	wantRunning(n)
	if _, err := e.cmds.Billing.TopUp(ctx, ids[0], billing.FromWhole(3), "after-failover"); err != nil {
		t.Fatal(err)
	}
	e.caughtUp(t, engB)
	rep, err := projections.AuditBilling(ctx, e.store, e.q, ids[0], nil)
	if err != nil || !rep.Clean() || rep.Behind {
		t.Fatalf("after failover: %v %v behind=%v", err, rep.Differences, rep.Behind)
	}
}

func TestWaitForHonoursContext(t *testing.T) {
	e := newEnv(t)
	eng, err := projections.NewEngine(e.pool, e.store, projections.All(), projections.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = eng.WaitFor(ctx, "billing", eventstore.Position{Commit: 1 << 40})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor on a stopped engine: %v", err)
	}
}

func TestCatchUpWaitsForEveryRunningProjector(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	eng, _ := e.startEngine(t)
	if err := eng.Running(ctx); err != nil {
		t.Fatal(err)
	}
	e.seed(t, rand.New(rand.NewPCG(7, 7)), 3, 200)
	head, err := e.store.HeadPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := eng.CatchUp(cctx, head); err != nil {
		t.Fatal(err)
	}
	// Straight after CatchUp, with no wait of our own, nothing up to head is pending.
	st, err := eng.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Lag != 0 {
			t.Errorf("projector %s: lag %d after CatchUp", s.Name, s.Lag)
		}
	}
}
