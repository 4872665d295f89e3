package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/testenv"
)

// Issue 26 item 4: an output PostgreSQL cannot store, from json.jq or from an API http.request
// calls, or a failure whose details it cannot store, fails its attempt with output_unstorable
// instead of failing its append forever: retried while attempts remain, then FAILED, never
// charged, and the message repeats nothing of the output.
func TestUnstorableOutputsFailTheirAttempt(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/number":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"secret":"s3cr3t","n":1e999999}`))
		case "/nul":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("s3cr3t\x00"))
		}
	}))
	t.Cleanup(api.Close)
	detail, err := modules.NewModule(modules.Definition{Name: "test.faildetail", Timeout: 5 * time.Second,
		Run: func(context.Context, modules.Call) (json.RawMessage, error) {
			return nil, &modules.Failure{Code: "upstream", Message: "it said no", Details: map[string]string{"body": "s3cr3t\x00"}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	reg := modules.Builtins(modules.BuiltinsConfig{AllowPrivateNetworks: true})
	if err := reg.Register(detail); err != nil {
		t.Fatal(err)
	}
	startExecutor(t, env, reg, "a")
	cmds := commands.New(env.Store, commands.WithModules(reg))
	for _, tc := range []struct{ name, module, config, what string }{
		{"json.jq producing U+0000", "json.jq", `{"query":"{\"a\": \"\\u0000\"}"}`, "output"},
		{"json.jq producing a number of 140001 digits", "json.jq", `{"query":"{\"n\": (\"1\" + \"0\" * 140000 | tonumber)}"}`, "output"},
		{"http.request answered 1e999999", "http.request", `{"url":"` + api.URL + `/number"}`, "output"},
		{"http.request answered a NUL", "http.request", `{"url":"` + api.URL + `/nul"}`, "output"},
		{"a failure whose details hold a NUL", "test.faildetail", `{}`, "error details"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: tc.module,
				Input: json.RawMessage(`{}`), Config: json.RawMessage(tc.config), Attempts: 2})
			if err != nil {
				t.Fatal(err)
			}
			done := waitTerminal(t, env.Cmds, st.ID)
			var f struct{ Code, Message string }
			if err := json.Unmarshal(done.Error, &f); err != nil || done.Status != execution.StatusFailed || f.Code != "output_unstorable" {
				t.Fatalf("%s ended %s with %s", tc.module, done.Status, done.Error)
			}
			if done.FailedAttempts != 2 || done.TotalUsage != 0 {
				t.Fatalf("failed attempts %d (want both), usage %s (want none)", done.FailedAttempts, done.TotalUsage)
			}
			if !strings.HasPrefix(f.Message, "the module's "+tc.what+" cannot be stored: ") || strings.Contains(string(done.Error), "s3cr3t") {
				t.Fatalf("message %q", f.Message)
			}
		})
	}
	if bal, err := env.Cmds.Billing.Balance(context.Background(), ws); err != nil || bal.Total() != billing.FromWhole(100) {
		t.Fatalf("balance %v (%v): the unstorable calls were charged", bal.Total(), err)
	}
}

// refusingStore refuses every completion whose output holds marker as PostgreSQL refuses text
// it cannot store, as if the checks before the append had missed something.
type refusingStore struct {
	eventstore.Store
	marker string
}

func (s refusingStore) poisoned(events []eventstore.EventData) bool {
	for _, e := range events {
		if e.Type == "ExecutionCompleted" && strings.Contains(string(e.Data), s.marker) {
			return true
		}
	}
	return false
}

func (s refusingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if s.poisoned(events) {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, eventstore.ErrUnstorable)
	}
	return s.Store.Append(ctx, stream, expected, events...)
}

func (s refusingStore) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	for _, a := range appends {
		if s.poisoned(a.Events) {
			return nil, fmt.Errorf("append to %s: %w", a.Stream, eventstore.ErrUnstorable)
		}
	}
	return s.Store.AppendMulti(ctx, appends...)
}

// A completion the store refuses after every check passed fails its attempt the same way, on
// the claimed path and on the unclaimed one (a repeatable module), with a charge or without.
func TestCompletionTheStoreRefusesFailsItsAttempt(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	echo := func(name string, cost int64, repeatable bool) modules.Module {
		m, err := modules.NewModule(modules.Definition{Name: name, CostMilli: cost, Timeout: 5 * time.Second, Repeatable: repeatable,
			Run: func(_ context.Context, call modules.Call) (json.RawMessage, error) { return call.Input, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	reg := registry(t, echo("test.claimed", 1000, false), echo("test.free", 0, false), echo("test.unclaimed", 1000, true))
	cmds, _ := startInstanceOn(t, env, refusingStore{Store: env.Store, marker: "poison"}, reg, executor.Config{Worker: "a", Concurrency: 4})
	for _, module := range []string{"test.claimed", "test.free", "test.unclaimed"} {
		st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: ws, Module: module,
			Input: json.RawMessage(`{"v":"poison"}`), Config: json.RawMessage(`{}`), Attempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		done := waitTerminal(t, env.Cmds, st.ID)
		var f struct{ Code string }
		if json.Unmarshal(done.Error, &f) != nil || done.Status != execution.StatusFailed || f.Code != "output_unstorable" || done.FailedAttempts != 2 {
			t.Fatalf("%s ended %s after %d failed attempts: %s", module, done.Status, done.FailedAttempts, done.Error)
		}
	}
	if bal, err := env.Cmds.Billing.Balance(context.Background(), ws); err != nil || bal.Total() != billing.FromWhole(100) {
		t.Fatalf("balance %v (%v): the refused completions were charged", bal.Total(), err)
	}
}
