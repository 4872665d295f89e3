package livehub_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/testenv"
)

func appendTo(t *testing.T, s eventstore.Store, stream string) {
	t.Helper()
	if _, err := s.Append(context.Background(), stream, eventstore.Any(),
		eventstore.EventData{ID: uuid.New(), Type: "Noted", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

// startedHub is a hub over a fresh store's events that filter selects, started until the test
// ends, and the context it runs in.
func startedHub(t *testing.T, filter eventstore.Filter) (*testenv.Env, *livehub.Hub, context.Context) {
	t.Helper()
	env := testenv.New(t)
	hub := livehub.New(env.Store, filter, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return env, hub, ctx
}

func TestWatchersHearTheirStreamOnly(t *testing.T) {
	env, hub, _ := startedHub(t, eventstore.Filter{Categories: []string{"thing"}})
	a, b := hub.Watch("thing-a"), hub.Watch("thing-b")
	appendTo(t, env.Store, "thing-a")
	select {
	case <-a.C:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher of thing-a heard nothing")
	}
	appendTo(t, env.Store, "other-a") // filtered out
	appendTo(t, env.Store, "thing-c")
	appendTo(t, env.Store, "thing-b")
	select {
	case <-b.C:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher of thing-b heard nothing")
	}
	select {
	case <-a.C:
		t.Fatal("the watcher of thing-a heard another stream's event")
	default:
	}
	a.Close()
	b.Close()
	if n := hub.Watchers(); n != 0 {
		t.Fatalf("%d watchers left after Close", n)
	}
}

func TestUntilWaitsForTheCondition(t *testing.T) {
	env, hub, ctx := startedHub(t, eventstore.Filter{})
	done := make(chan error, 1)
	go func() {
		done <- hub.Until(ctx, "thing-x", time.Hour, func() (bool, error) {
			evs, err := env.Store.ReadStream(ctx, "thing-x", 0, 10)
			return err == nil && len(evs) >= 2, nil
		})
	}()
	testenv.Eventually(t, 10*time.Second, "the watch to register", func() bool { return hub.Watchers() == 1 })
	appendTo(t, env.Store, "thing-x")
	appendTo(t, env.Store, "thing-x")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Until did not return after the condition held")
	}
	if hub.Watchers() != 0 {
		t.Fatal("Until left its watch registered")
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := hub.Until(short, "thing-y", time.Hour, func() (bool, error) { return false, nil }); err == nil {
		t.Fatal("Until must end with the context's error")
	}
}

// A hub started with a context that has already ended (serve told to stop at once) starts
// cleanly: the context's end is not an error.
func TestStartAfterStopIsClean(t *testing.T) {
	env := testenv.New(t)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{"thing"}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := hub.Start(ctx); err != nil {
		t.Fatalf("start with an ended context = %v, want nil", err)
	}
}

// waitRecords waits until the watch has been told of n records since the last Records, and
// returns them.
func waitRecords(t *testing.T, w *livehub.Watch, n int) ([]eventstore.RecordedEvent, bool) {
	t.Helper()
	var got []eventstore.RecordedEvent
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case <-w.C:
			recs, complete := w.Records()
			if !complete {
				return nil, false
			}
			got = append(got, recs...)
		case <-deadline:
			t.Fatalf("%d of %d records came", len(got), n)
		}
	}
	return got, true
}

func TestWatchRecordsHandsOverTheLogsRecordsInOrder(t *testing.T) {
	env, hub, _ := startedHub(t, eventstore.Filter{Categories: []string{"thing"}})
	w, plain := hub.WatchRecords("thing-a"), hub.Watch("thing-a")
	defer w.Close()
	defer plain.Close()
	for range 3 {
		appendTo(t, env.Store, "thing-a")
	}
	recs, complete := waitRecords(t, w, 3)
	if !complete {
		t.Fatal("three records within the bound were reported incomplete")
	}
	for i, rec := range recs {
		if rec.Stream != "thing-a" || rec.Revision != uint64(i) || string(rec.Data) != `{}` {
			t.Fatalf("record %d: %+v", i, rec)
		}
	}
	if recs, _ := plain.Records(); len(recs) != 0 {
		t.Fatalf("a plain watch kept %d records", len(recs))
	}

	// A nudge ahead of the log is not a record: the watcher must read the store.
	hub.Notify("thing-a")
	<-w.C
	if _, complete := w.Records(); complete {
		t.Fatal("records after a nudge were reported complete")
	}
	if _, complete := w.Records(); !complete {
		t.Fatal("an empty take after the nudge was taken is not complete")
	}
}

func TestWatchRecordsPastTheBoundAreIncomplete(t *testing.T) {
	env, hub, _ := startedHub(t, eventstore.Filter{Categories: []string{"thing"}})
	w, after := hub.WatchRecords("thing-a"), hub.Watch("thing-b")
	defer w.Close()
	defer after.Close()
	for range 40 { // more than a watch keeps
		appendTo(t, env.Store, "thing-a")
	}
	appendTo(t, env.Store, "thing-b") // the hub hands records on in log order
	select {
	case <-after.C:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher of thing-b heard nothing")
	}
	if recs, complete := w.Records(); complete {
		t.Fatalf("40 records were kept whole past the bound (%d kept)", len(recs))
	}
}

func TestNotifyEndedHandsTheEndAndKeepsTheRecordsWhole(t *testing.T) {
	env := testenv.New(t)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{"thing"}}, nil)
	w, plain := hub.WatchRecords("thing-a"), hub.Watch("thing-a")
	defer w.Close()
	defer plain.Close()
	hub.NotifyEnded("thing-a", livehub.Ended{Revision: 4, State: "four"})
	hub.NotifyEnded("thing-a", livehub.Ended{Revision: 3, State: "three"}) // an older end is not kept over a newer
	<-w.C
	<-plain.C // a plain watch is woken too, and reads the store as on any nudge
	end, ok := w.Ended()
	if !ok || end.Revision != 4 || end.State != "four" {
		t.Fatalf("Ended = %+v, %v; want revision 4", end, ok)
	}
	if _, ok := w.Ended(); ok {
		t.Fatal("an end was taken twice")
	}
	if _, ok := plain.Ended(); ok {
		t.Fatal("a plain watch kept an end")
	}
	// Unlike Notify's bare nudge, an end leaves the records whole: a watcher that cannot use
	// it folds what the log brings.
	if _, complete := w.Records(); !complete {
		t.Fatal("records after an end were reported incomplete")
	}
}

func TestDeliveredTracksTheStreamsExpected(t *testing.T) {
	env, hub, _ := startedHub(t, eventstore.Filter{Categories: []string{"thing"}})
	hub.Expect("thing-a")
	if next, ok := hub.Delivered("thing-a"); !ok || next != 0 {
		t.Fatalf("Delivered before any record = %d, %v; want 0, true", next, ok)
	}
	w := hub.Watch("thing-b") // thing-b is not expected: the hub keeps nothing of it
	defer w.Close()
	appendTo(t, env.Store, "thing-a")
	appendTo(t, env.Store, "thing-a")
	appendTo(t, env.Store, "thing-b")
	<-w.C // the hub hands records on in log order: thing-a's two are delivered
	if next, ok := hub.Delivered("thing-a"); !ok || next != 2 {
		t.Fatalf("Delivered after two records = %d, %v; want 2, true", next, ok)
	}
	if _, ok := hub.Delivered("thing-b"); ok {
		t.Fatal("a stream never expected is tracked")
	}
	hub.Expect("thing-a") // again: what was delivered stays known
	if next, _ := hub.Delivered("thing-a"); next != 2 {
		t.Fatalf("Expect again reset Delivered to %d", next)
	}
}
