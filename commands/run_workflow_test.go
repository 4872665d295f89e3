package commands_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/testenv"
)

// watchedStore is a Postgres store that records the streams read, and the streams of each
// AppendMulti.
type watchedStore struct {
	eventstore.Store
	mu      sync.Mutex
	reads   []string
	appends [][]string
}

func (s *watchedStore) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.RecordedEvent, error) {
	s.mu.Lock()
	s.reads = append(s.reads, stream)
	s.mu.Unlock()
	return s.Store.ReadStream(ctx, stream, from, max)
}

func (s *watchedStore) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	streams := make([]string, len(appends))
	for i, a := range appends {
		streams[i] = a.Stream
	}
	s.mu.Lock()
	s.appends = append(s.appends, streams)
	s.mu.Unlock()
	return s.Store.AppendMulti(ctx, appends...)
}

// TakesClaims keeps the Postgres store's claims (and its one-commit AppendMulti) visible.
func (s *watchedStore) TakesClaims() bool { return true }

func (s *watchedStore) read(stream string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.reads, stream)
}

// appendsTo counts the AppendMulti calls that wrote to stream.
func (s *watchedStore) appendsTo(stream string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, streams := range s.appends {
		if slices.Contains(streams, stream) {
			n++
		}
	}
	return n
}

// A trigger takes the workflow as its process cached it, with no read, and its run's commit
// checks that the workflow is still there: a definition another instance saved meanwhile
// refuses that commit, and the trigger reads it and starts the run on it. Both ways a run is
// written: with a runner (the first stage in the trigger's commit) and without.
func TestATriggerStartsTheDefinitionAnotherInstanceSaved(t *testing.T) {
	for _, withRunner := range []bool{true, false} {
		name := map[bool]string{true: "run first", false: "trigger alone"}[withRunner]
		t.Run(name, func(t *testing.T) {
			env := testenv.New(t)
			ws := env.Workspace(t, 10)
			ctx := context.Background()
			store := &watchedStore{Store: env.Store}
			h := commands.New(store)
			if withRunner {
				runner := &recordingRunner{cmds: h}
				h = commands.WithRunner(h, runner)
			}
			wfID := twoEchoes(t, h, ws)
			trigger := func() run.State {
				t.Helper()
				runs, err := h.Workflows.TriggerWorkflow(ctx, commands.TriggerWorkflow{WorkspaceID: ws, WorkflowID: wfID, Input: json.RawMessage(`{"n":1}`)})
				if err != nil || len(runs) != 1 {
					t.Fatalf("trigger: %v %v", runs, err)
				}
				st, err := commands.New(env.Store).Workflows.Run(ctx, runs[0].RunID) // from the log
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			trigger()
			store.mu.Lock()
			store.reads = nil
			store.mu.Unlock()
			if first := trigger(); len(first.Definition.Components) != 3 {
				t.Fatalf("run of the saved workflow has %d components, want 3", len(first.Definition.Components))
			}
			if store.read(commands.WorkflowStream(wfID)) {
				t.Fatalf("a trigger of a workflow this process holds read its stream")
			}

			other := commands.New(env.Store) // another instance
			if _, err := other.Workflows.UpdateWorkflow(ctx, ws, wfID, mustDef(t, `{"name": "two",
				"components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
				"edges": [{"from": "t", "to": "a"}]}`)); err != nil {
				t.Fatal(err)
			}
			got := trigger()
			if len(got.Definition.Components) != 2 {
				t.Fatalf("run after another instance saved the workflow has %d components, want the saved 2", len(got.Definition.Components))
			}
			if !store.read(commands.WorkflowStream(wfID)) {
				t.Fatalf("the trigger did not read the workflow its check found moved on")
			}
		})
	}
}
