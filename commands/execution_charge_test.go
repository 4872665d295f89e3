package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

const chargeWorker = "worker-a"

// submitEchoes submits n core.echo executions in ws through h (no runner: they stay CREATED)
// and returns their ids.
func submitEchoes(t *testing.T, h *commands.Commands, ws string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		st, err := h.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
			Input: json.RawMessage(`{"n":1}`), Config: json.RawMessage(`{}`), Attempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = st.ID
	}
	return ids
}

// claimAndComplete is the item of a repeatable call: charge one credit, claim and complete.
func claimAndComplete(h *commands.Commands, id string) commands.ChargedFinish {
	return commands.ChargedFinish{ExecutionID: id,
		Charge:   commands.ChargeRequest{Cause: "execution-" + id, Amount: billing.FromWhole(1)},
		ClaimFor: time.Minute,
		Outcome:  commands.Outcome{Worker: chargeWorker, Output: json.RawMessage(`{"n":1}`), Usage: billing.FromWhole(1)}}
}

func balance(t *testing.T, h *commands.Commands, ws string) billing.Credits {
	t.Helper()
	b, err := h.Billing.Balance(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	return b.Total()
}

// A batch's charges and its executions' claims and completions are one commit, and an item
// the balance cannot cover writes nothing.
func TestChargeAndFinishIsOneCommit(t *testing.T) {
	env := testenv.New(t)
	h := commands.New(env.Store)
	ws := env.Workspace(t, 2)
	ids := submitEchoes(t, h, ws, 3)
	items := make([]commands.ChargedFinish, len(ids))
	for i, id := range ids {
		items[i] = claimAndComplete(h, id)
	}
	before := len(env.Commits(t, commands.BillingStream(ws)))

	res, err := h.Charges.ChargeAndFinish(context.Background(), ws, items)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if res[i].Err != nil || !res[i].Recorded || res[i].State.Status != execution.StatusCompleted {
			t.Fatalf("item %d: %+v", i, res[i])
		}
	}
	if !errors.Is(res[2].Err, domain.ErrInsufficientCredits) || res[2].Recorded {
		t.Fatalf("the third item, beyond the balance: %+v", res[2])
	}
	if got := len(env.Commits(t, commands.BillingStream(ws))); got != before+1 {
		t.Fatalf("billing stream written by %d transactions, want %d", got, before+1)
	}
	written := env.Commits(t, commands.ExecutionStream(ids[0]), commands.ExecutionStream(ids[1]))
	if len(written) != 3 { // each execution's submit, and the one commit of both outcomes
		t.Fatalf("the two executions were written by %d transactions, want 3", len(written))
	}
	for _, i := range []int{0, 1} {
		st, err := commands.New(env.Store).Executions.Execution(context.Background(), ids[i]) // a fresh fold, no cache
		if err != nil || st.Status != execution.StatusCompleted || st.TotalUsage != billing.FromWhole(1) {
			t.Fatalf("execution %d as stored: %+v, %v", i, st, err)
		}
	}
	if st, _ := commands.New(env.Store).Executions.Execution(context.Background(), ids[2]); st.Status != execution.StatusCreated {
		t.Fatalf("the uncovered execution is %s", st.Status)
	}
	if got := balance(t, commands.New(env.Store), ws); got != 0 {
		t.Fatalf("balance %s, want 0", got)
	}
}

// A batch decided on a stale state, or charging a cause charged before, writes nothing and
// says so, for the caller to take the separate path.
func TestChargeAndFinishWritesNothingWhenItCannotCombine(t *testing.T) {
	env := testenv.New(t)
	h := commands.New(env.Store)
	ws := env.Workspace(t, 10)
	ids := submitEchoes(t, h, ws, 2)

	// Another process claims the second execution: h's cached state of it is stale.
	other := commands.New(env.Store)
	if _, err := other.Attempts.ClaimExecution(context.Background(), ids[1], "worker-b", func(execution.State) time.Duration { return time.Minute }); err != nil {
		t.Fatal(err)
	}
	_, err := h.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(h, ids[0]), claimAndComplete(h, ids[1])})
	if !errors.Is(err, commands.ErrNotCombined) {
		t.Fatalf("stale state: %v, want ErrNotCombined", err)
	}
	if got := balance(t, commands.New(env.Store), ws); got != billing.FromWhole(10) {
		t.Fatalf("balance %s after a refused batch, want 10", got)
	}
	if st, _ := commands.New(env.Store).Executions.Execution(context.Background(), ids[0]); st.Status != execution.StatusCreated {
		t.Fatalf("the first execution is %s after a refused batch", st.Status)
	}

	// A cause charged before: the derived event id is taken.
	if _, err := h.Billing.Charge(context.Background(), ws, "execution-"+ids[0], billing.FromWhole(1)); err != nil {
		t.Fatal(err)
	}
	_, err = h.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(h, ids[0])})
	if !errors.Is(err, commands.ErrNotCombined) {
		t.Fatalf("cause charged before: %v, want ErrNotCombined", err)
	}
	if got := balance(t, commands.New(env.Store), ws); got != billing.FromWhole(9) {
		t.Fatalf("balance %s, want 9 (the one separate charge)", got)
	}
}

// An account another process charged since this one cached it is read again: the batch is
// still written in one commit, against the balance as it now stands.
func TestChargeAndFinishRereadsAMovedAccount(t *testing.T) {
	env := testenv.New(t)
	h := commands.New(env.Store)
	ws := env.Workspace(t, 3)
	ids := submitEchoes(t, h, ws, 2)
	if _, err := h.Billing.Balance(context.Background(), ws); err != nil { // h caches the account
		t.Fatal(err)
	}
	other := commands.New(env.Store)
	if _, err := other.Billing.Charge(context.Background(), ws, "elsewhere", billing.FromWhole(2)); err != nil {
		t.Fatal(err)
	}
	res, err := h.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{claimAndComplete(h, ids[0]), claimAndComplete(h, ids[1])})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Recorded || res[0].Err != nil {
		t.Fatalf("first item: %+v", res[0])
	}
	if !errors.Is(res[1].Err, domain.ErrInsufficientCredits) {
		t.Fatalf("second item, past the balance left by the other charge: %+v", res[1])
	}
	if got := balance(t, commands.New(env.Store), ws); got != 0 {
		t.Fatalf("balance %s, want 0", got)
	}
}

// completeWith is claimAndComplete recording output.
func completeWith(h *commands.Commands, id, output string) commands.ChargedFinish {
	it := claimAndComplete(h, id)
	it.Outcome.Output = json.RawMessage(output)
	return it
}

// Issue 26 item 4: an outcome PostgreSQL cannot store (a module output holding a NUL
// character, a number beyond numeric) is left out of its batch uncharged, with an error of its
// own, and the batch's other members are charged and recorded in one commit.
func TestChargeAndFinishLeavesOutAnUnstorableOutcome(t *testing.T) {
	env := testenv.New(t)
	h := commands.New(env.Store)
	ws := env.Workspace(t, 10)
	ids := submitEchoes(t, h, ws, 4)
	items := []commands.ChargedFinish{claimAndComplete(h, ids[0]), completeWith(h, ids[1], `{"a":"\u0000"}`),
		completeWith(h, ids[2], `{"n":1e999999}`), claimAndComplete(h, ids[3])}
	before := len(env.Commits(t, commands.BillingStream(ws)))

	res, err := h.Charges.ChargeAndFinish(context.Background(), ws, items)
	if err != nil {
		t.Fatalf("one poisoned member failed the batch: %v", err)
	}
	for _, i := range []int{1, 2} {
		if !errors.Is(res[i].Err, eventstore.ErrUnstorable) || res[i].Recorded {
			t.Fatalf("poisoned item %d: %+v", i, res[i])
		}
		if st, _ := commands.New(env.Store).Executions.Execution(context.Background(), ids[i]); st.Status != execution.StatusCreated {
			t.Fatalf("poisoned execution %d is %s", i, st.Status)
		}
	}
	for _, i := range []int{0, 3} {
		if res[i].Err != nil || !res[i].Recorded || res[i].State.Status != execution.StatusCompleted {
			t.Fatalf("item %d: %+v", i, res[i])
		}
	}
	if got := len(env.Commits(t, commands.BillingStream(ws))); got != before+1 {
		t.Fatalf("billing stream written by %d transactions, want %d", got, before+1)
	}
	if got := balance(t, commands.New(env.Store), ws); got != billing.FromWhole(8) {
		t.Fatalf("balance %s, want 8: the poisoned members are not charged", got)
	}
}

// poisonStore makes the events appended to one stream by AppendMulti ones PostgreSQL refuses,
// as if a check had missed them.
type poisonStore struct {
	eventstore.Store
	stream string
}

func (p poisonStore) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	parts := slices.Clone(appends)
	for i, a := range parts {
		if a.Stream == p.stream {
			parts[i].Events = slices.Clone(a.Events)
			for j := range parts[i].Events {
				parts[i].Events[j].Data = []byte(`{"poison":"\u0000"}`)
			}
		}
	}
	return p.Store.AppendMulti(ctx, parts...)
}

// A batch the store refuses for one member's data is written member by member: the others
// land, charged once, and only that one fails.
func TestChargeAndFinishWritesMembersAloneWhenTheStoreRefusesOne(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ids := submitEchoes(t, commands.New(env.Store), ws, 3)
	h := commands.New(poisonStore{Store: env.Store, stream: commands.ExecutionStream(ids[1])})
	items := make([]commands.ChargedFinish, len(ids))
	for i, id := range ids {
		items[i] = claimAndComplete(h, id)
	}
	res, err := h.Charges.ChargeAndFinish(context.Background(), ws, items)
	if err != nil {
		t.Fatalf("one refused member failed the batch: %v", err)
	}
	if !errors.Is(res[1].Err, eventstore.ErrUnstorable) || res[1].Recorded {
		t.Fatalf("the refused item: %+v", res[1])
	}
	for _, i := range []int{0, 2} {
		if res[i].Err != nil || !res[i].Recorded {
			t.Fatalf("item %d: %+v", i, res[i])
		}
		if st, _ := commands.New(env.Store).Executions.Execution(context.Background(), ids[i]); st.Status != execution.StatusCompleted {
			t.Fatalf("execution %d as stored is %s", i, st.Status)
		}
	}
	if st, _ := commands.New(env.Store).Executions.Execution(context.Background(), ids[1]); st.Status != execution.StatusCreated {
		t.Fatalf("the refused execution is %s", st.Status)
	}
	if got := balance(t, commands.New(env.Store), ws); got != billing.FromWhole(8) {
		t.Fatalf("balance %s, want 8", got)
	}
}
