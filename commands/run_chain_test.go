package commands_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

// chain is a run of the components a -> b -> c (core.echo) in a workspace of 10 credits, and
// the items of the chain ChainNext makes from its first stage, run first as the scheduler hands
// it to the runner, each with the stage's input as its output, uncharged. h made the chain and
// caches the run: it is to charge it.
type chain struct {
	env   *testenv.Env
	ws    string
	h     *commands.Commands
	runID string
	items []commands.ChargedFinish
}

func chainOf(t *testing.T) chain {
	t.Helper()
	env := testenv.New(t)
	c := chain{env: env, ws: env.Workspace(t, 10), h: commands.New(env.Store)}
	st, first := firstStageOf(t, c.h, c.ws, `{"name": "three",
		"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"},
			{"id": "c", "module": "core.echo"}],
		"edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "c"}]}`)
	c.runID = st.ID
	c.items = []commands.ChargedFinish{commands.FinishedFirst(first, chargeWorker, first.State.Input, commands.Metadata{})}
	for {
		next, ok := c.h.ChainNext(context.Background(), c.items[len(c.items)-1])
		if !ok {
			break
		}
		c.items = append(c.items, commands.FinishedFirst(next, chargeWorker, next.State.Input, commands.Metadata{}))
	}
	if len(c.items) != 3 {
		t.Fatalf("a chain of %d stages, want 3", len(c.items))
	}
	return c
}

// A run of three stages a runner takes first, chained, is one commit: the trigger, each
// stage's submit, outcome and charge, and each step, the last of which ends the run.
func TestAChainedRunIsOneCommit(t *testing.T) {
	c := chainOf(t)
	env, ws, h, id, items := c.env, c.ws, c.h, c.runID, c.items
	ctx := context.Background()
	res, err := h.Charges.ChargeAndFinish(ctx, ws, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Recorded || !items[i].Step.Written {
			t.Fatalf("item %d: %+v, step written %v", i, r, items[i].Step.Written)
		}
	}
	if last := items[2].Step.After; last.Status != run.StatusCompleted {
		t.Fatalf("the chain's last step leaves the run %s", last.Status)
	}
	got, err := commands.New(env.Store).Workflows.Run(ctx, id)
	if err != nil || got.Status != run.StatusCompleted {
		t.Fatalf("run in the log: %s (%v)", got.Status, err)
	}
	streams := []string{commands.RunStream(id), commands.BillingStream(ws)}
	for _, it := range items {
		streams = append(streams, commands.ExecutionStream(it.ExecutionID))
	}
	if tx := env.Commits(t, streams...); len(tx) != 3 { // the account's top-up, the trigger, the chain
		t.Fatalf("commits %v: the chain is not one commit", tx)
	}
	if b, err := env.Cmds.Billing.Balance(ctx, ws); err != nil || b.Total() != billing.FromWhole(7) {
		t.Fatalf("balance %v (%v), want 7 credits", b.Total(), err)
	}
}

// A link whose stage the commit does not dispatch (here the link before it is missing) is left
// out whole: its execution is not written, its charge not made; the links before it are.
func TestAChainLinkWithoutItsDispatchIsLeftOut(t *testing.T) {
	c := chainOf(t)
	env, ws, h, id, items := c.env, c.ws, c.h, c.runID, c.items
	ctx := context.Background()
	res, err := h.Charges.ChargeAndFinish(ctx, ws, []commands.ChargedFinish{items[0], items[2]})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Recorded || res[1].Recorded || res[1].Err == nil {
		t.Fatalf("results %+v", res)
	}
	if _, err := env.Store.ReadStream(ctx, commands.ExecutionStream(items[2].ExecutionID), 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("the link left out was written (%v)", err)
	}
	got, err := commands.New(env.Store).Workflows.Run(ctx, id)
	if err != nil || stageOf(got, "a").Status != run.StageStatusCompleted || stageOf(got, "b").Status != run.StageStatusCreated || stageOf(got, "c").ID != "" {
		t.Fatalf("run: a %s, b %s, c %q (%v)", stageOf(got, "a").Status, stageOf(got, "b").Status, stageOf(got, "c").ID, err)
	}
	if b, err := env.Cmds.Billing.Balance(ctx, ws); err != nil || b.Total() != billing.FromWhole(9) {
		t.Fatalf("balance %v (%v), want 9 credits", b.Total(), err)
	}
}
