package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

// runFirstItem is the charge-batch item of a call run first: its submit, outcome and charge,
// and its request's claim under owner.
func runFirstItem(t *testing.T, ws string, key, owner []byte) (commands.ChargedFinish, *commands.RequestClaim) {
	t.Helper()
	id := uuid.NewString()
	create, err := execution.DecideSubmit(execution.State{}, execution.Submit{ExecutionID: id, WorkspaceID: ws, Module: "core.echo",
		Input: json.RawMessage(`{}`), Config: json.RawMessage(`{}`), Attempts: 1, CostMilli: 1000, Runner: chargeWorker}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	claim := commands.NewRequestClaim(key, owner, time.Now().Add(time.Minute),
		func(context.Context) (bool, error) { return false, errors.New("not settled in this test") })
	return commands.ChargedFinish{ExecutionID: id, Create: create, Claim: claim,
		Charge:  commands.ChargeRequest{Cause: "execution-" + id, Amount: billing.FromWhole(1)},
		Outcome: commands.Outcome{Worker: chargeWorker, Output: json.RawMessage(`{}`), Usage: billing.FromWhole(1)}}, claim
}

// A charge batch takes its calls' signature claims in its commit. A call whose signature a
// replay took first is left out, answered ErrReplayed, and neither created nor charged; the
// rest of the batch is written in one commit.
func TestChargeAndFinishLeavesOutAReplay(t *testing.T) {
	env := testenv.New(t)
	h := commands.New(env.Store)
	ws := env.Workspace(t, 10)
	held := holdClaim(t, env)
	keys := [][]byte{randomKey(), held[:], randomKey()}
	items := make([]commands.ChargedFinish, len(keys))
	claims := make([]*commands.RequestClaim, len(keys))
	for i, k := range keys {
		items[i], claims[i] = runFirstItem(t, ws, k, []byte("a replay or not"))
	}
	res, err := h.Charges.ChargeAndFinish(context.Background(), ws, items)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		if res[i].Err != nil || !res[i].Recorded || !claims[i].Settled() {
			t.Fatalf("item %d: %+v (claim settled %v), want recorded", i, res[i], claims[i].Settled())
		}
		if err := claims[i].Settle(context.Background()); err != nil {
			t.Fatalf("item %d: settle after its commit took the claim: %v, want no round trip and no error", i, err)
		}
	}
	if !errors.Is(res[1].Err, commands.ErrReplayed) || res[1].Recorded {
		t.Fatalf("the replay's item: %+v, want ErrReplayed", res[1])
	}
	if !errors.Is(claims[1].Settle(context.Background()), commands.ErrReplayed) {
		t.Fatal("the replay's claim does not settle as a replay")
	}
	if _, err := commands.New(env.Store).Executions.Execution(context.Background(), items[1].ExecutionID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("the replay's execution: %v, want not found", err)
	}
	if got := balance(t, commands.New(env.Store), ws); got != billing.FromWhole(8) {
		t.Fatalf("balance %s, want 8: two calls charged", got)
	}
	if got := len(env.Commits(t, commands.ExecutionStream(items[0].ExecutionID), commands.ExecutionStream(items[2].ExecutionID))); got != 1 {
		t.Fatalf("the two calls were written by %d transactions, want 1", got)
	}
}

// holdClaim commits a claim on a new key under another request, as the first of two copies
// of a signed request would, and returns the key.
func holdClaim(t *testing.T, env *testenv.Env) uuid.UUID {
	t.Helper()
	held := uuid.New()
	if _, err := env.Store.AppendMulti(context.Background(), eventstore.StreamAppend{Stream: "other-" + uuid.NewString(),
		Expected: eventstore.NoStream(), Events: []eventstore.EventData{{ID: uuid.New(), Type: "Taken", Data: []byte(`{}`)}},
		Claims: []eventstore.Claim{{Key: held[:], Owner: []byte("the first request"), Until: time.Now().Add(time.Minute)}}}); err != nil {
		t.Fatal(err)
	}
	return held
}

func randomKey() []byte {
	k := uuid.New()
	return k[:]
}

// orderedStore is a store that takes no claims (as KurrentDB) and notes when it is first
// appended to.
type orderedStore struct {
	eventstore.Store
	log *[]string
}

func (s orderedStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	*s.log = append(*s.log, "append")
	return s.Store.Append(ctx, stream, expected, events...)
}

// On a store that takes no claims, a submit settles its request's claim before its first
// append, and a replay's submit appends nothing.
func TestSubmitSettlesItsClaimFirstOnAStoreWithoutClaims(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	for _, held := range []bool{false, true} {
		var log []string
		h := commands.New(orderedStore{Store: env.Store, log: &log})
		claim := commands.NewRequestClaim(randomKey(), []byte("owner"), time.Now().Add(time.Minute),
			func(context.Context) (bool, error) { log = append(log, "settle"); return held, nil })
		_, err := h.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
			Input: json.RawMessage(`{}`), Config: json.RawMessage(`{}`), Attempts: 1, Claim: claim})
		switch {
		case held && (!errors.Is(err, commands.ErrReplayed) || len(log) != 1):
			t.Fatalf("a replay's submit: %v, calls %v; want ErrReplayed after one settle and no append", err, log)
		case !held && (err != nil || len(log) < 2 || log[0] != "settle" || log[1] != "append"):
			t.Fatalf("a submit: %v, calls %v; want the settle before the first append", err, log)
		}
	}
}

// settlingStore settles a claim when a charge batch is written: the caller of a call the batch
// has planned learns then that its signature is a replay's (and answers 401).
type settlingStore struct {
	eventstore.Store
	settle func()
}

func (s settlingStore) TakesClaims() bool { return true }

func (s settlingStore) AppendMulti(ctx context.Context, parts ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	s.settle()
	return s.Store.AppendMulti(ctx, parts...)
}

// A call's caller may learn that its signature is a replay's (and answer 401) once a charge
// batch has planned the call: the batch carries the claim whatever is known of it (the claim's
// carried, internal test), and the first request's row refuses it, so the call is neither
// created nor charged.
func TestAReplayFoundWhileItsBatchIsPlannedIsNotWritten(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	held := holdClaim(t, env)
	item, _ := runFirstItem(t, ws, held[:], []byte("the replay"))
	claim := commands.NewRequestClaim(held[:], []byte("the replay"), time.Now().Add(time.Minute),
		func(context.Context) (bool, error) { return true, nil }) // the guard finds the first request's row
	item.Claim = claim
	var once sync.Once
	h := commands.New(settlingStore{Store: env.Store, settle: func() {
		once.Do(func() {
			if err := claim.Settle(context.Background()); !errors.Is(err, commands.ErrReplayed) {
				t.Errorf("settle: %v, want ErrReplayed", err)
			}
		})
	}})
	other, _ := runFirstItem(t, ws, randomKey(), []byte("another call"))
	res, err := h.Charges.ChargeAndFinish(context.Background(), ws, []commands.ChargedFinish{item, other})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, commands.ErrReplayed) || res[0].Recorded {
		t.Fatalf("the replay's item: %+v, want ErrReplayed", res[0])
	}
	if res[1].Err != nil || !res[1].Recorded {
		t.Fatalf("the other item: %+v, want recorded", res[1])
	}
	if _, err := commands.New(env.Store).Executions.Execution(context.Background(), item.ExecutionID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("the replay's execution: %v, want not found", err)
	}
	if got := balance(t, commands.New(env.Store), ws); got != billing.FromWhole(9) {
		t.Fatalf("balance %s, want 9: only the other call charged", got)
	}
}

// takeOnlyRunner is a runner that takes calls and is never asked to run one first.
type takeOnlyRunner struct{ t *testing.T }

func (r takeOnlyRunner) Running() bool  { return true }
func (r takeOnlyRunner) Worker() string { return "take-only" }
func (r takeOnlyRunner) Take(execution.State) <-chan execution.State {
	return make(chan execution.State, 1)
}
func (r takeOnlyRunner) RunFirst(context.Context, commands.FirstRun, time.Duration) (execution.State, bool) {
	r.t.Error("a call that cannot run first was offered to RunFirst")
	return execution.State{}, false
}
func (r takeOnlyRunner) TryRunFirst(context.Context, commands.FirstRun) (execution.State, bool) {
	r.t.Error("a call that cannot run first was offered to TryRunFirst")
	return execution.State{}, false
}

// A submit appended on its own (a call not run first: without a runner, or of a worker
// module; no idempotency key, no cache window) takes its request's claim in the commit of its
// submit: the replay guard is never asked, and the key is held by the request's owner
// afterwards. A replay's submit, whose key another request holds, is ErrReplayed and appends
// nothing.
func TestASubmitAppendedAloneTakesItsClaimInItsCommit(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	ctx := context.Background()
	price := billing.FromWhole(1)
	if _, err := env.Cmds.Modules.Register(ctx, commands.RegisterModule{WorkspaceID: ws, Name: "acme.worker", Price: &price,
		Transport: commands.ModuleTransport{Type: execution.TransportWorker}, By: access.Rights{Role: "admin"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, module string
		h            *commands.Commands
	}{
		{"no runner", "core.echo", commands.New(env.Store)},
		{"a worker module", "acme.worker", commands.WithRunner(commands.New(env.Store), takeOnlyRunner{t})},
	} {
		submit := func(key []byte) (execution.State, *commands.RequestClaim, error) {
			claim := commands.NewRequestClaim(key, []byte("this request"), time.Now().Add(time.Minute),
				func(context.Context) (bool, error) { return false, errors.New("the replay guard was asked") })
			st, err := c.h.Executions.SubmitExecution(ctx, commands.SubmitExecution{WorkspaceID: ws, Module: c.module,
				Input: json.RawMessage(`{}`), Config: json.RawMessage(`{}`), Attempts: 1, Claim: claim})
			return st, claim, err
		}
		key := randomKey()
		st, claim, err := submit(key)
		if err != nil || st.Status != execution.StatusCreated || !claim.Settled() {
			t.Fatalf("%s: submit: %+v, %v (claim settled %v), want CREATED with its claim taken in its commit", c.name, st, err, claim.Settled())
		}
		_, err = env.Store.AppendMulti(ctx, eventstore.StreamAppend{Stream: "other-" + uuid.NewString(), Expected: eventstore.NoStream(),
			Events: []eventstore.EventData{{ID: uuid.New(), Type: "Taken", Data: []byte(`{}`)}},
			Claims: []eventstore.Claim{{Key: key, Owner: []byte("another request"), Until: time.Now().Add(time.Minute)}}})
		if !errors.Is(err, eventstore.ErrClaimed) {
			t.Fatalf("%s: another owner taking the submit's key: %v, want ErrClaimed", c.name, err)
		}

		held := holdClaim(t, env)
		before, err := env.Store.HeadPosition(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := submit(held[:]); !errors.Is(err, commands.ErrReplayed) {
			t.Fatalf("%s: a replay's submit: %v, want ErrReplayed", c.name, err)
		}
		if after, err := env.Store.HeadPosition(ctx); err != nil || after != before {
			t.Fatalf("%s: the log moved from %v to %v (%v): a replay's submit appended", c.name, before, after, err)
		}
	}
}
