package commands_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/testenv"
)

// acrossBatches submits n echoes in each workspace and returns a batch apiece that charges
// and completes them.
func acrossBatches(t *testing.T, h *commands.Commands, wss []string, n int) []commands.WorkspaceCharges {
	t.Helper()
	out := make([]commands.WorkspaceCharges, len(wss))
	for i, ws := range wss {
		out[i].WorkspaceID = ws
		for _, id := range submitEchoes(t, h, ws, n) {
			out[i].Items = append(out[i].Items, claimAndComplete(h, id))
		}
	}
	return out
}

// newCommits is the transactions that wrote to streams since before (env.Commits then).
func newCommits(t *testing.T, env *testenv.Env, before []int64, streams ...string) []int64 {
	t.Helper()
	var out []int64
	for _, tx := range env.Commits(t, streams...) {
		if !slices.Contains(before, tx) {
			out = append(out, tx)
		}
	}
	return out
}

func billingStreams(wss []string) []string {
	out := make([]string, len(wss))
	for i, ws := range wss {
		out[i] = commands.BillingStream(ws)
	}
	return out
}

// Several workspaces' charge batches are one commit, each decided on its own account: an
// item its own balance cannot cover is refused while the others' are written.
func TestChargeAndFinishAcrossWorkspacesIsOneCommit(t *testing.T) {
	env := testenv.New(t)
	h := commands.New(env.Store)
	wss := []string{env.Workspace(t, 2), env.Workspace(t, 2), env.Workspace(t, 1)}
	batches := acrossBatches(t, h, wss, 2)
	before := env.Commits(t, billingStreams(wss)...)

	out := h.Charges.ChargeAndFinishAcross(context.Background(), nil, batches)
	for w, r := range out {
		if r.Err != nil || len(r.Results) != 2 {
			t.Fatalf("workspace %d: %+v", w, r)
		}
		for i, res := range r.Results {
			uncovered := w == 2 && i == 1
			if uncovered != errors.Is(res.Err, domain.ErrInsufficientCredits) || uncovered == res.Recorded {
				t.Fatalf("workspace %d item %d: %+v", w, i, res)
			}
		}
	}
	if txs := newCommits(t, env, before, billingStreams(wss)...); len(txs) != 1 {
		t.Fatalf("three workspaces' charges written by %d transactions, want 1", len(txs))
	}
	fresh := commands.New(env.Store) // folds the streams, no cache
	for w, ws := range wss {
		if got := balance(t, fresh, ws); got != 0 {
			t.Fatalf("workspace %d: balance %s, want 0", w, got)
		}
		for i, it := range batches[w].Items {
			st, err := fresh.Executions.Execution(context.Background(), it.ExecutionID)
			want := execution.StatusCompleted
			if w == 2 && i == 1 {
				want = execution.StatusCreated
			}
			if err != nil || st.Status != want {
				t.Fatalf("workspace %d execution %d: %s, %v; want %s", w, i, st.Status, err, want)
			}
		}
	}
}

// When one workspace's account moved under the cached state it was decided on, the combined
// append writes nothing and each batch is written alone, that one against its balance as it
// now stands: nothing is charged twice or lost. That workspace then goes alone (in turns)
// while the others are combined.
func TestChargeAndFinishAcrossWritesEachAloneWhenRefused(t *testing.T) {
	env := testenv.New(t)
	h := commands.New(env.Store)
	wss := []string{env.Workspace(t, 3), env.Workspace(t, 3), env.Workspace(t, 3)}
	for _, ws := range wss {
		if _, err := h.Billing.Balance(context.Background(), ws); err != nil { // h caches the account
			t.Fatal(err)
		}
	}
	batches := acrossBatches(t, h, wss, 2)
	if _, err := commands.New(env.Store).Billing.Charge(context.Background(), wss[1], "elsewhere", billing.FromWhole(2)); err != nil {
		t.Fatal(err)
	}
	before := env.Commits(t, billingStreams(wss)...)

	out := h.Charges.ChargeAndFinishAcross(context.Background(), nil, batches)
	for w, r := range out {
		for i, res := range r.Results {
			uncovered := w == 1 && i == 1
			if r.Err != nil || uncovered != errors.Is(res.Err, domain.ErrInsufficientCredits) || uncovered == res.Recorded {
				t.Fatalf("workspace %d item %d: %+v, %v", w, i, res, r.Err)
			}
		}
	}
	if txs := newCommits(t, env, before, billingStreams(wss)...); len(txs) != 3 {
		t.Fatalf("after a refusal the three batches were written by %d transactions, want 3 (each alone)", len(txs))
	}
	fresh := commands.New(env.Store)
	for w, want := range []int64{1, 0, 1} {
		if got := balance(t, fresh, wss[w]); got != billing.FromWhole(want) {
			t.Fatalf("workspace %d: balance %s, want %d", w, got, want)
		}
	}
	if !h.Charges.Contended(wss[1]) || h.Charges.Contended(wss[0]) {
		t.Fatal("only the workspace charged elsewhere is contended")
	}

	if _, err := commands.New(env.Store).Billing.TopUp(context.Background(), wss[1], billing.FromWhole(1), ""); err != nil {
		t.Fatal(err)
	}
	again := acrossBatches(t, h, wss, 1)
	before = env.Commits(t, billingStreams(wss)...)
	for w, r := range h.Charges.ChargeAndFinishAcross(context.Background(), nil, again) {
		if r.Err != nil || !r.Results[0].Recorded {
			t.Fatalf("workspace %d, second round: %+v", w, r)
		}
	}
	shared := newCommits(t, env, before, billingStreams([]string{wss[0], wss[2]})...)
	alone := newCommits(t, env, before, commands.BillingStream(wss[1]))
	if len(shared) != 1 || len(alone) != 1 || shared[0] == alone[0] {
		t.Fatalf("second round: the uncontended accounts in %v, the contended one in %v; want one commit each, apart", shared, alone)
	}

	// Within one turn on the accounts of the contended workspace and the others, all three
	// are written in the turn's one commit.
	if _, err := commands.New(env.Store).Billing.TopUp(context.Background(), wss[1], billing.FromWhole(1), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Billing.TopUp(context.Background(), wss[2], billing.FromWhole(1), ""); err != nil { // known to h
		t.Fatal(err)
	}
	third := acrossBatches(t, h, wss[1:], 1)
	held := h.Charges.AwaitAccountTurns(context.Background(), wss)
	if held == nil {
		t.Fatal("no turn taken on the contended account")
	}
	before = env.Commits(t, billingStreams(wss)...)
	for w, r := range h.Charges.ChargeAndFinishAcross(context.Background(), held, third) {
		if r.Err != nil || !r.Results[0].Recorded {
			t.Fatalf("workspace %d, in a turn: %+v", w+1, r)
		}
	}
	if txs := newCommits(t, env, before, billingStreams(wss)...); len(txs) != 1 {
		t.Fatalf("in a turn, the contended account and the other were written by %d transactions, want 1", len(txs))
	}
	if got := balance(t, commands.New(env.Store), wss[1]); got != 0 {
		t.Fatalf("contended workspace: balance %s, want 0", got)
	}
}
