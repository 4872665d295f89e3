package executor

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

// echoCharge submits an echo and returns the item that charges one credit for it and
// completes it.
func echoCharge(t *testing.T, cmds *commands.Commands, ws string) commands.ChargedFinish {
	t.Helper()
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
		Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return commands.ChargedFinish{ExecutionID: st.ID,
		Charge:   commands.ChargeRequest{Cause: "execution-" + st.ID, Amount: billing.FromWhole(1)},
		ClaimFor: time.Minute,
		Outcome:  commands.Outcome{Worker: "test", Output: json.RawMessage(`{"n":1}`), Usage: billing.FromWhole(1)}}
}

// While another process holds the turn on a workspace's account, the charges that queue for it
// are written in one batch once the turn comes: the batch is gathered after the wait, not
// before it.
func TestChargesQueuedDuringTheWaitForATurnShareItsBatch(t *testing.T) {
	env := testenv.New(t)
	cmds, other := commands.New(env.Store), commands.New(env.Store)
	const n = 8
	ws := env.Workspace(t, n+2)
	ctx := context.Background()
	items := make([]commands.ChargedFinish, n)
	for i := range items {
		items[i] = echoCharge(t, cmds, ws)
	}
	// The other process moves the account under this one's cached state: this one is refused
	// once, and takes turns on the account from then on.
	if _, err := cmds.Billing.Balance(ctx, ws); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*commands.Commands{other, cmds} {
		if _, err := h.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{echoCharge(t, other, ws)}); err != nil {
			t.Fatal(err)
		}
	}
	held, err := env.Store.(eventstore.StreamTurns).TakeTurn(ctx, commands.BillingStream(ws), 0)
	if err != nil {
		t.Fatal(err)
	}
	releaseOnce := sync.OnceFunc(held.End)
	t.Cleanup(releaseOnce) // a failed wait must not leave the lock's connection taken
	reg := prometheus.NewRegistry()
	c := newCharger(cmds, newMetrics(reg).rounds)
	done := make(chan error, n)
	for _, it := range items {
		go func() {
			res, err := c.charge(ctx, ws, it)
			if err == nil && !res.Recorded {
				err = res.Err
			}
			done <- err
		}()
	}
	testenv.Eventually(t, 30*time.Second, "every charge to queue while the turn is held", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queues[ws]) == n
	})
	releaseOnce()
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var txs int
	if err := env.Pool.QueryRow(ctx, `SELECT count(DISTINCT tx_id) FROM events WHERE stream = $1 AND type = 'CreditsCharged'
		AND data->>'cause' = ANY($2)`, commands.BillingStream(ws), causes(items)).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if txs != 1 {
		t.Fatalf("the %d charges queued during the wait were written in %d commits, want 1", n, txs)
	}
	// The round is on /metrics: one round of n charges, after one wait for a turn.
	for name, wantSum := range map[string]float64{
		"switchyard_executor_charge_round_charges":     n,
		"switchyard_executor_charge_turn_wait_seconds": 0, // a time: any, above 0
		"switchyard_executor_charge_round_seconds":     0,
	} {
		count, sum := histogram(t, reg, name)
		if count != 1 || sum <= 0 || (wantSum > 0 && sum != wantSum) {
			t.Errorf("%s: %d observations summing to %g, want 1 summing to %g (0: any time)", name, count, sum, wantSum)
		}
	}
}

// histogram is the observations of the histogram name in reg, and their sum.
func histogram(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	h := series(t, reg, name).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

func causes(items []commands.ChargedFinish) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Charge.Cause
	}
	return out
}

// turnCounter counts the turns taken on the store.
type turnCounter struct {
	eventstore.Store
	turns atomic.Int64
}

func (s *turnCounter) TakeTurn(ctx context.Context, stream string, from uint64) (eventstore.Turn, error) {
	s.turns.Add(1)
	return s.Store.(eventstore.StreamTurns).TakeTurn(ctx, stream, from)
}

// A charger that takes turns on a workspace's account takes one per batch, none for the empty
// queue it finds after its last batch: that turn was a round trip and a rolled-back transaction
// per flush for nothing.
func TestChargerTakesNoTurnForAnEmptyQueue(t *testing.T) {
	env := testenv.New(t)
	store := &turnCounter{Store: env.Store}
	cmds, other := commands.New(store), commands.New(env.Store)
	ws := env.Workspace(t, 4)
	ctx := context.Background()
	// Refused once for an account the other process moved: cmds takes turns from now on.
	if _, err := cmds.Billing.Balance(ctx, ws); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*commands.Commands{other, cmds} {
		if _, err := h.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{echoCharge(t, other, ws)}); err != nil {
			t.Fatal(err)
		}
	}
	item := echoCharge(t, cmds, ws)
	before := store.turns.Load()
	c := newCharger(cmds, newMetrics(nil).rounds)
	res, err := c.charge(ctx, ws, item)
	if err != nil || !res.Recorded {
		t.Fatalf("charge: %+v, %v", res, err)
	}
	testenv.Eventually(t, 30*time.Second, "the charger to end its flush", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, flushing := c.queues[ws]
		return !flushing
	})
	if got := store.turns.Load() - before; got != 1 {
		t.Fatalf("%d turns taken for one batch, want 1", got)
	}
}

// gateStore holds the first AppendMulti until open is closed.
type gateStore struct {
	eventstore.Store
	first sync.Once
	held  chan struct{} // closed once the first AppendMulti waits
	open  chan struct{}
}

func (s *gateStore) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	s.first.Do(func() {
		close(s.held)
		<-s.open
	})
	return s.Store.AppendMulti(ctx, appends...)
}

// The charges of several workspaces that queue while a charge commits are written together in
// the next commit, not one commit a workspace; each workspace is charged exactly its own.
func TestChargesOfManyWorkspacesShareACommit(t *testing.T) {
	env := testenv.New(t)
	store := &gateStore{Store: env.Store, held: make(chan struct{}), open: make(chan struct{})}
	cmds := commands.New(store)
	ctx := context.Background()
	const perWorkspace = 3
	wss := []string{env.Workspace(t, 1), env.Workspace(t, perWorkspace), env.Workspace(t, perWorkspace)}
	var queued []commands.ChargedFinish
	for _, ws := range wss[1:] {
		for range perWorkspace {
			queued = append(queued, echoCharge(t, cmds, ws))
		}
	}
	first := echoCharge(t, cmds, wss[0])
	openOnce := sync.OnceFunc(func() { close(store.open) })
	t.Cleanup(openOnce)
	c := newCharger(cmds, newMetrics(nil).rounds)
	done := make(chan error, len(queued)+1)
	charge := func(ws string, it commands.ChargedFinish) {
		res, err := c.charge(ctx, ws, it)
		if err == nil && !res.Recorded {
			err = res.Err
		}
		done <- err
	}
	go charge(wss[0], first)
	<-store.held // the first workspace's batch is committing
	for i, it := range queued {
		go charge(wss[1+i/perWorkspace], it)
	}
	testenv.Eventually(t, 30*time.Second, "every charge to queue while a batch commits", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queues[wss[1]])+len(c.queues[wss[2]]) == len(queued)
	})
	openOnce()
	for range len(queued) + 1 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var txs int
	if err := env.Pool.QueryRow(ctx, `SELECT count(DISTINCT tx_id) FROM events WHERE type = 'CreditsCharged'
		AND data->>'cause' = ANY($1)`, causes(queued)).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if txs != 1 {
		t.Fatalf("the charges of two workspaces queued during a commit were written in %d commits, want 1", txs)
	}
	for _, ws := range wss {
		b, err := commands.New(env.Store).Billing.Balance(ctx, ws)
		if err != nil || b.Total() != 0 {
			t.Fatalf("workspace %s: balance %+v, %v; want 0", ws, b, err)
		}
	}
}

// blockedAppends holds the single-stream appends to one stream until open is closed.
type blockedAppends struct {
	eventstore.Store
	stream     string
	once       sync.Once
	held, open chan struct{}
}

func (s *blockedAppends) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if stream == s.stream {
		s.once.Do(func() { close(s.held) })
		<-s.open
	}
	return s.Store.Append(ctx, stream, expected, events...)
}

// A batch that could not be written in one go is charged the separate way beside the rounds:
// while its append waits, the charges of another workspace are written.
func TestASeparateChargeHoldsUpOnlyItsWorkspace(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	wsA, wsB := env.Workspace(t, 2), env.Workspace(t, 2)
	store := &blockedAppends{Store: env.Store, stream: commands.BillingStream(wsA), held: make(chan struct{}), open: make(chan struct{})}
	openOnce := sync.OnceFunc(func() { close(store.open) })
	t.Cleanup(openOnce)
	cmds := commands.New(store)
	stale := echoCharge(t, cmds, wsA)
	// Another process claims the execution: the batch decided on cmds' cached state is refused
	// (commands.ErrNotCombined), and its charge goes the separate way, where it waits.
	if _, err := commands.New(env.Store).Attempts.ClaimExecution(ctx, stale.ExecutionID, "worker-b", func(execution.State) time.Duration { return time.Minute }); err != nil {
		t.Fatal(err)
	}
	c := newCharger(cmds, newMetrics(nil).rounds)
	doneA := make(chan error, 1)
	go func() {
		_, err := c.charge(ctx, wsA, stale)
		doneA <- err
	}()
	select {
	case <-store.held:
	case err := <-doneA:
		t.Fatalf("the stale batch was charged without the separate way: %v", err)
	}
	doneB := make(chan error, 1)
	go func() {
		res, err := c.charge(ctx, wsB, echoCharge(t, cmds, wsB))
		if err == nil && !res.Recorded {
			err = res.Err
		}
		doneB <- err
	}()
	select {
	case err := <-doneB:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("another workspace's charge waited for a separate charge's append")
	}
	openOnce()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	for ws, want := range map[string]int64{wsA: 1, wsB: 1} {
		b, err := commands.New(env.Store).Billing.Balance(ctx, ws)
		if err != nil || b.Total() != billing.FromWhole(want) {
			t.Fatalf("workspace %s: balance %+v, %v; want %d", ws, b, err, want)
		}
	}
}
