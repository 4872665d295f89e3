package windows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/windows"
	"github.com/switchyard/switchyard/testenv"
)

// windowTouches counts the reads and appends of cache windows' streams.
type windowTouches struct {
	eventstore.Store
	mu sync.Mutex
	n  int
}

func (s *windowTouches) touch(streams ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, stream := range streams {
		if eventstore.Category(stream) == execution.CacheCategory {
			s.n++
		}
	}
}

func (s *windowTouches) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *windowTouches) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.RecordedEvent, error) {
	s.touch(stream)
	return s.Store.ReadStream(ctx, stream, from, max)
}

func (s *windowTouches) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	s.touch(stream)
	return s.Store.Append(ctx, stream, expected, events...)
}

func (s *windowTouches) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	for _, a := range appends {
		s.touch(a.Stream)
	}
	return s.Store.AppendMulti(ctx, appends...)
}

// A follower puts the windows another process opens into its own process's cache, as the log
// brings them: an identical call submitted there afterwards is the window's free repeat without
// reading or appending to the window's stream (it would otherwise guess the window not open,
// append its opening, be refused on revision and read it).
func TestTheFollowerLearnsTheWindowsAnotherProcessOpens(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 100)
	ctx := context.Background()
	store := &windowTouches{Store: env.Store}
	here := commands.New(store)
	reg := prometheus.NewRegistry()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	f := windows.New(env.Store, here, windows.Config{Logger: log, Registerer: reg})
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	if err := f.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	const n = 5
	call := func(i int) commands.SubmitExecution {
		return commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo", Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Config: json.RawMessage(`{}`), Attempts: 1, CacheWindow: time.Minute}
	}
	leaders := make([]execution.State, n)
	for i := range n {
		var err error
		if leaders[i], err = env.Cmds.Executions.SubmitExecution(ctx, call(i)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "every window learned", func() bool { return learned(t, reg) == n })
	for i := range n {
		st, err := here.Executions.SubmitExecution(ctx, call(i))
		if err != nil || st.CachedFrom != leaders[i].ID {
			t.Fatalf("repeat %d: %+v, %v; want the free repeat of %s", i, st.Record(), err, leaders[i].ID)
		}
	}
	if touched := store.count(); touched != 0 {
		t.Fatalf("the repeats read or appended to their windows' streams %d times, want none", touched)
	}
}

// learned reads switchyard_cache_windows_learned_total from reg.
func learned(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "switchyard_cache_windows_learned_total" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("switchyard_cache_windows_learned_total is not registered")
	return 0
}
