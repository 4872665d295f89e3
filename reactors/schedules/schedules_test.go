package schedules_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/schedule"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/schedules"
	"github.com/switchyard/switchyard/testenv"
)

// clock is the tests' injected clock: it moves only when told, and tells each reactor.
type clock struct {
	mu   sync.Mutex
	now  time.Time
	subs []chan struct{}
}

func newClock(at time.Time) *clock { return &clock{now: at} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) moved() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{}, 1)
	c.subs = append(c.subs, ch)
	return ch
}

func (c *clock) set(at time.Time) {
	c.mu.Lock()
	c.now = at
	subs := c.subs
	c.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return l
}

// t0 is a Monday, on the minute.
var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

type fixture struct {
	env  *testenv.Env
	clk  *clock
	cmds *commands.Commands
	ws   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.New(t)
	clk := newClock(t0.Add(30 * time.Second))
	return &fixture{env: env, clk: clk, cmds: commands.New(env.Store, commands.WithClock(clk.Now)), ws: env.Workspace(t, 1000)}
}

// start runs a reactor as one process would: commands of its own over a store of its own
// (its own caches), on the fixture's clock; the returned func stops it.
func (f *fixture) start(t *testing.T) context.CancelFunc {
	t.Helper()
	return f.startLocked(t, nil)
}

// startLocked is start with the reactor elected by lock.
func (f *fixture) startLocked(t *testing.T, lock schedules.LockFunc) context.CancelFunc {
	t.Helper()
	store, err := postgres.New(context.Background(), f.env.Pool, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cmds := commands.New(store, commands.WithClock(f.clk.Now))
	r := schedules.New(store, cmds, schedules.Config{Lock: lock, Now: f.clk.Now, ClockMoved: f.clk.moved(), Logger: quietLog()})
	return testenv.Go(t, r.Run)
}

func (f *fixture) workflow(t *testing.T, config string) workflow.State {
	t.Helper()
	def := fmt.Sprintf(`{"name": "scheduled %d", "components": [
		{"id": "tick", "module": "ON_SCHEDULE", "config": %s},
		{"id": "echo", "module": "core.echo"}],
		"edges": [{"from": "tick", "to": "echo"}]}`, time.Now().UnixNano(), config)
	var d workflow.Definition
	if err := json.Unmarshal([]byte(def), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := f.cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: f.ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// fires reads what the stream of the schedule "tick" recorded of each fire.
func (f *fixture) fires(t *testing.T, wf workflow.State) []schedule.Fired {
	t.Helper()
	return f.firesOf(t, wf, "tick")
}

// firesOf reads what the stream of schedule component recorded of each fire.
func (f *fixture) firesOf(t *testing.T, wf workflow.State, component string) []schedule.Fired {
	t.Helper()
	events, err := f.env.Store.ReadStream(context.Background(), commands.ScheduleStream(wf.ID, component), 0, 10000)
	if errors.Is(err, eventstore.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []schedule.Fired
	for _, ev := range events {
		e, err := domain.Events.Decode(ev.Type, ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		if fired, ok := e.(schedule.Fired); ok {
			out = append(out, fired)
		}
	}
	return out
}

// fireAt moves the clock to at and waits for the schedule to record its fire at fireTime.
func (f *fixture) fireAt(t *testing.T, wf workflow.State, at, fireTime time.Time) schedule.Fired {
	t.Helper()
	f.clk.set(at)
	var got schedule.Fired
	testenv.Eventually(t, 20*time.Second, "the fire at "+fireTime.Format(time.RFC3339), func() bool {
		for _, fired := range f.fires(t, wf) {
			if fired.FireTime.Equal(fireTime) && !fired.Dequeued {
				got = fired
				return true
			}
		}
		return false
	})
	return got
}

func (f *fixture) run(t *testing.T, wf workflow.State, fireTime time.Time) (run.State, bool) {
	t.Helper()
	r, err := f.cmds.Workflows.Run(context.Background(), commands.ScheduleRunID(wf.ID, "tick", fireTime))
	if errors.Is(err, domain.ErrNotFound) {
		return r, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

func (f *fixture) mustRun(t *testing.T, wf workflow.State, fireTime time.Time) run.State {
	t.Helper()
	var r run.State
	testenv.Eventually(t, 20*time.Second, "the run of the fire at "+fireTime.Format(time.RFC3339), func() bool {
		var ok bool
		r, ok = f.run(t, wf, fireTime)
		return ok
	})
	return r
}

func (f *fixture) end(t *testing.T, r run.State) {
	t.Helper()
	if _, err := f.cmds.Workflows.CancelRun(context.Background(), r.ID, "test ends it"); err != nil {
		t.Fatal(err)
	}
}

func TestOverlapSkip(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"every": "1m", "input": {"n": 1}}`)
	f.start(t)
	m1, m2, m3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	f.fireAt(t, wf, m1, m1)
	r1 := f.mustRun(t, wf, m1)
	if string(r1.Input) != `{"n": 1}` && string(r1.Input) != `{"n":1}` {
		t.Fatalf("trigger body %s, want config.input", r1.Input)
	}
	if got := f.fireAt(t, wf, m2, m2); got.Outcome != schedule.OutcomeSkipped {
		t.Fatalf("fire while the previous run runs: %+v, want skipped", got)
	}
	if _, ok := f.run(t, wf, m2); ok {
		t.Fatal("a skipped fire started a run")
	}
	f.end(t, r1)
	if got := f.fireAt(t, wf, m3, m3); got.Outcome != schedule.OutcomeStarted {
		t.Fatalf("fire after the previous run ended: %+v", got)
	}
	f.mustRun(t, wf, m3)
}

func TestOverlapAllow(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"every": "1m", "overlap": "allow"}`)
	f.start(t)
	m1, m2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	f.fireAt(t, wf, m1, m1)
	f.mustRun(t, wf, m1)
	f.fireAt(t, wf, m2, m2)
	f.mustRun(t, wf, m2)
	if r1, _ := f.run(t, wf, m1); r1.Status.Terminal() {
		t.Fatalf("allow ended the previous run: %s", r1.Status)
	}
}

func TestOverlapCancelPrevious(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"every": "1m", "overlap": "cancel_previous"}`)
	f.start(t)
	m1, m2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	f.fireAt(t, wf, m1, m1)
	r1 := f.mustRun(t, wf, m1)
	if got := f.fireAt(t, wf, m2, m2); got.Cancelled != r1.ID {
		t.Fatalf("fire %+v: want the previous run %s cancelled", got, r1.ID)
	}
	f.mustRun(t, wf, m2)
	testenv.Eventually(t, 20*time.Second, "the previous run cancelled", func() bool {
		r, _ := f.run(t, wf, m1)
		return r.Status == run.StatusFailed
	})
}

func TestOverlapQueueOne(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"every": "1m", "overlap": "queue_one"}`)
	f.start(t)
	m1, m2, m3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	f.fireAt(t, wf, m1, m1)
	r1 := f.mustRun(t, wf, m1)
	if got := f.fireAt(t, wf, m2, m2); got.Outcome != schedule.OutcomeQueued {
		t.Fatalf("fire while running: %+v, want queued", got)
	}
	if got := f.fireAt(t, wf, m3, m3); got.Outcome != schedule.OutcomeSkipped {
		t.Fatalf("second fire while running: %+v, want skipped (one is queued already)", got)
	}
	if _, ok := f.run(t, wf, m2); ok {
		t.Fatal("the queued fire started before the running run ended")
	}
	f.end(t, r1) // the clock does not move: the run's end alone starts the queued fire
	f.mustRun(t, wf, m2)
	if _, ok := f.run(t, wf, m3); ok {
		t.Fatal("a fire beyond the one queued started a run")
	}
}

func TestCatchUpAfterAStop(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"every": "1m", "overlap": "allow", "catchUp": "5m"}`)
	stop := f.start(t)
	m1 := t0.Add(time.Minute)
	f.fireAt(t, wf, m1, m1)
	stop()
	// Half an hour passes with no instance running; then one starts.
	back := t0.Add(31*time.Minute + 20*time.Second)
	f.clk.set(back)
	f.start(t)
	last := t0.Add(31 * time.Minute)
	f.mustRun(t, wf, last)
	want := map[time.Time]bool{m1: true}
	for i := 27; i <= 31; i++ {
		want[t0.Add(time.Duration(i)*time.Minute)] = true
		f.mustRun(t, wf, t0.Add(time.Duration(i)*time.Minute))
	}
	fired := f.fires(t, wf)
	if len(fired) != len(want) {
		t.Fatalf("%d fires recorded, want %d (the first and the 5 within catchUp): %+v", len(fired), len(want), fired)
	}
	for _, fi := range fired {
		if !want[fi.FireTime] || fi.Outcome != schedule.OutcomeStarted {
			t.Fatalf("fire %+v: not one of the fires within catchUp", fi)
		}
	}
	if _, ok := f.run(t, wf, t0.Add(26*time.Minute)); ok {
		t.Fatal("a fire older than catchUp ran")
	}
}

func TestPauseAndResume(t *testing.T) {
	f := newFixture(t)
	// "probe" is decided after "tick" in each look at the workflow: its fire at a moment shows
	// that the moment was looked at.
	var d workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "paused", "components": [
		{"id": "tick", "module": "ON_SCHEDULE", "config": {"every": "1m", "overlap": "allow"}},
		{"id": "probe", "module": "ON_SCHEDULE", "config": {"every": "1m", "overlap": "allow"}},
		{"id": "echo", "module": "core.echo"}],
		"edges": [{"from": "tick", "to": "echo"}, {"from": "probe", "to": "echo"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wf, err := f.cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: f.ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	f.start(t)
	looked := func(at time.Time) {
		t.Helper()
		f.clk.set(at)
		testenv.Eventually(t, 20*time.Second, "the moment "+at.Format(time.RFC3339)+" looked at", func() bool {
			return slices.ContainsFunc(f.firesOf(t, wf, "probe"), func(fi schedule.Fired) bool { return fi.FireTime.Equal(at) })
		})
	}
	m1, m2, m3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	looked(m1)
	v, err := f.cmds.Schedules.PauseSchedule(ctx, f.ws, wf.ID, "tick")
	if err != nil || !v.Paused {
		t.Fatalf("pause: %+v %v", v, err)
	}
	looked(m2)
	f.clk.set(m2.Add(30 * time.Second))
	if v, err = f.cmds.Schedules.ResumeSchedule(ctx, f.ws, wf.ID, "tick"); err != nil || v.Paused {
		t.Fatalf("resume: %+v %v", v, err)
	}
	looked(m3)
	// A fire that failed (a busy database) is tried again shortly after: the probe may be
	// ahead of it then.
	testenv.Eventually(t, 20*time.Second, "tick's fire at 3m", func() bool {
		return slices.ContainsFunc(f.fires(t, wf), func(fi schedule.Fired) bool { return fi.FireTime.Equal(m3) })
	})
	var got []time.Time
	for _, fi := range f.fires(t, wf) {
		got = append(got, fi.FireTime)
	}
	if len(got) != 2 || !got[0].Equal(m1) || !got[1].Equal(m3) {
		t.Fatalf("tick fired at %v, want 1m and 3m: not at 2m, while paused", got)
	}
	if _, err := f.cmds.Schedules.PauseSchedule(ctx, f.ws, wf.ID, "echo"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("pausing a component that is no schedule: %v, want not found", err)
	}
}

// Two reactors over one database, both firing at once (no lock between them), through 60
// fires of an every-second schedule: each fire time starts exactly one run.
func TestTwoInstancesFireEachFireOnce(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"every": "1s", "overlap": "allow"}`)
	f.start(t)
	f.start(t)
	const n = 60
	base := t0.Add(31 * time.Second)
	for i := range n {
		at := base.Add(time.Duration(i) * time.Second)
		f.fireAt(t, wf, at, at)
		f.mustRun(t, wf, at)
	}
	fired := f.fires(t, wf)
	seen := map[time.Time]bool{}
	for _, fi := range fired {
		if seen[fi.FireTime] {
			t.Fatalf("fire at %s recorded twice", fi.FireTime)
		}
		seen[fi.FireTime] = true
	}
	if len(fired) != n {
		t.Fatalf("%d fires recorded, want %d", len(fired), n)
	}
	f.env.CaughtUp(t, "runs")
	_, total, err := f.env.Queries.RunsOf(context.Background(), f.ws, projections.RunFilter{WorkflowID: wf.ID}, projections.Page{Page: 1, Limit: 1})
	if err != nil || total != n {
		t.Fatalf("%d runs of the workflow (%v), want exactly %d: one per fire", total, err, n)
	}
}

func TestTriggerStartsOneRunNow(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin"}`)
	ctx := context.Background()
	started, err := f.cmds.Schedules.TriggerSchedule(ctx, f.ws, wf.ID, "tick", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cmds.Workflows.Run(ctx, started.RunID); err != nil {
		t.Fatalf("the triggered run: %v", err)
	}
	views, err := f.cmds.Schedules.Schedules(ctx, f.ws, wf.ID)
	if err != nil || len(views) != 1 {
		t.Fatalf("schedules: %+v %v", views, err)
	}
	v := views[0]
	// 10:00:30 UTC on Monday 5 January is 11:00:30 in Berlin: the next fire is Tuesday's 09:00.
	if v.LastRunID != started.RunID || len(v.NextFires) != 10 || !v.NextFires[0].Equal(time.Date(2026, 1, 6, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("view %+v", v)
	}
}

// A fire recorded by a lead that stopped before starting its run (a crash between the two)
// has its run started by the next lead, once.
func TestANewLeadStartsARecordedFiresRun(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"every": "1m"}`)
	m1 := t0.Add(time.Minute)
	fired := schedule.Fired{WorkflowID: wf.ID, ComponentID: "tick", FireTime: m1, Outcome: schedule.OutcomeStarted,
		RunID: commands.ScheduleRunID(wf.ID, "tick", m1), At: m1}
	data, err := domain.Encode(fired)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Store.Append(context.Background(), commands.ScheduleStream(wf.ID, "tick"), eventstore.NoStream(),
		eventstore.EventData{ID: uuid.New(), Type: fired.EventType(), Data: data}); err != nil {
		t.Fatal(err)
	}
	f.clk.set(m1.Add(30 * time.Second))
	if _, ok := f.run(t, wf, m1); ok {
		t.Fatal("the run exists before any lead started it")
	}
	f.start(t)
	f.mustRun(t, wf, m1)
	if n := len(f.fires(t, wf)); n != 1 {
		t.Fatalf("%d fires recorded, want the one", n)
	}
}

// Two instances under the lock: the lead stops half-way through 60 fires and the other takes
// over; each fire time still starts exactly one run.
func TestTheLeadHandsOver(t *testing.T) {
	f := newFixture(t)
	wf := f.workflow(t, `{"every": "1s", "overlap": "allow"}`)
	lock := func(ctx context.Context, fn func(context.Context) error) error {
		return projections.HoldLock(ctx, f.env.Pool.Config().ConnConfig, "schedules", fn)
	}
	stopFirst := f.startLocked(t, lock)
	f.startLocked(t, lock)
	const n = 60
	base := t0.Add(31 * time.Second)
	for i := range n {
		if i == n/2 {
			stopFirst()
		}
		at := base.Add(time.Duration(i) * time.Second)
		f.clk.set(at)
		f.mustRun(t, wf, at)
	}
	seen := map[time.Time]bool{}
	for _, fi := range f.fires(t, wf) {
		if seen[fi.FireTime] || fi.Outcome != schedule.OutcomeStarted {
			t.Fatalf("fire %+v: recorded twice or not started", fi)
		}
		seen[fi.FireTime] = true
	}
	if len(seen) != n {
		t.Fatalf("%d fires recorded, want %d", len(seen), n)
	}
}

// The reactor over the daylight-saving changes of 2026 in two zones, on the injected clock: a
// time a spring-forward skips fires at the gap's end, a time a fall-back repeats fires once.
// "probe" fires every 30 minutes, on every step, after the other two are decided (components
// are decided in order), so its fire at a moment shows that moment was looked at; its next
// fire is half an hour away, so no timer of the reactor's rings between two steps.
func TestFiresAcrossDSTInTwoZones(t *testing.T) {
	f := newFixture(t)
	def := `{"name": "dst", "components": [
		{"id": "berlin", "module": "ON_SCHEDULE", "config": {"cron": "30 2 * * *", "timezone": "Europe/Berlin", "overlap": "allow"}},
		{"id": "newyork", "module": "ON_SCHEDULE", "config": {"cron": "30 1,2 * * *", "timezone": "America/New_York", "overlap": "allow"}},
		{"id": "probe", "module": "ON_SCHEDULE", "config": {"every": "30m"}},
		{"id": "echo", "module": "core.echo"}],
		"edges": [{"from": "berlin", "to": "echo"}, {"from": "newyork", "to": "echo"}, {"from": "probe", "to": "echo"}]}`
	var d workflow.Definition
	if err := json.Unmarshal([]byte(def), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := f.cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: f.ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	f.start(t)
	steps := []string{
		"2026-03-08T06:30:00Z", // 01:30 EST in New York
		"2026-03-08T07:00:00Z", // 03:00 EDT: the end of the gap that skipped 02:30
		"2026-03-29T01:00:00Z", // 03:00 CEST in Berlin: the end of the gap that skipped 02:30
		"2026-10-25T00:30:00Z", // 02:30 CEST
		"2026-10-25T01:30:00Z", // 02:30 CET, the second time: no fire
		"2026-11-01T05:30:00Z", // 01:30 EDT in New York
		"2026-11-01T06:30:00Z", // 01:30 EST, the second time: no fire
		"2026-11-01T07:30:00Z", // 02:30 EST
	}
	for _, step := range steps {
		at, _ := time.Parse(time.RFC3339, step)
		f.clk.set(at)
		testenv.Eventually(t, 20*time.Second, "the moment "+step+" looked at", func() bool {
			for _, fi := range f.firesOf(t, wf, "probe") {
				if fi.FireTime.Equal(at) {
					return true
				}
			}
			return false
		})
	}
	times := func(component string) string {
		var out []string
		for _, fi := range f.firesOf(t, wf, component) {
			out = append(out, fi.FireTime.Format(time.RFC3339))
		}
		return fmt.Sprint(out)
	}
	if got, want := times("berlin"), "[2026-03-29T01:00:00Z 2026-10-25T00:30:00Z]"; got != want {
		t.Errorf("Berlin fired at %s, want %s", got, want)
	}
	if got, want := times("newyork"), "[2026-03-08T06:30:00Z 2026-03-08T07:00:00Z 2026-11-01T05:30:00Z 2026-11-01T07:30:00Z]"; got != want {
		t.Errorf("New York fired at %s, want %s", got, want)
	}
}

// A workflow created while the reactor runs, and a change of its schedule, reach the reactor
// from the log: the reactor only looks at a workflow when a wake it knows of is due, or an
// event of it arrives.
func TestLearnsSchedulesFromTheLog(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	wf := f.workflow(t, `{"every": "1m", "input": {"v": 1}}`)
	m1 := t0.Add(time.Minute)
	f.fireAt(t, wf, m1, m1)
	f.end(t, f.mustRun(t, wf, m1))
	// Every 30 s from now on: the next fire is at 1m30s, before the 2m the reactor knew of.
	if _, err := f.cmds.Workflows.UpdateComponent(context.Background(), f.ws, wf.ID, "tick",
		workflow.ComponentPatch{Config: json.RawMessage(`{"every": "30s", "input": {"v": 2}}`)}); err != nil {
		t.Fatal(err)
	}
	half := m1.Add(30 * time.Second)
	f.fireAt(t, wf, half, half)
	if r := f.mustRun(t, wf, half); string(r.Input) != `{"v":2}` && string(r.Input) != `{"v": 2}` {
		t.Fatalf("the run after the change has input %s", r.Input)
	}
}
