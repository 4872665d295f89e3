// Package storetest is the conformance suite every eventstore backend must pass: Run, or
// RunWithOptions for a backend that declares a limitation (Options).
//
// The suite only uses the eventstore interface. It never sleeps to wait for something: it waits
// on conditions (events arriving, a head position being reached) with deadlines, because a
// backend may make a committed event visible to the log a moment after Append returns (the
// Postgres backend hides events while an older transaction anywhere on the server is running).
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
)

// Factory returns a fresh, empty store for one test; the suite closes it. Cleanup of the
// backend's data (dropping a schema, a database) is registered by the factory with t.Cleanup.
// The suite may call Close more than once, and expects the second call to do nothing.
type Factory func(t *testing.T) eventstore.Store

// waitTimeout bounds every wait of the suite. It is a deadline for a condition, not a pause:
// a healthy backend meets each condition in milliseconds.
const waitTimeout = 30 * time.Second

// loadTimeout bounds the concurrency test, which moves 20,000 events through contended appends:
// 9 s on an idle 2-core machine, 12 s under -race with both cores busy, and several times that
// when the whole suite runs beside it under -race. Its appends and its subscriber progress
// throughout, so the bound only has to catch a stall, not measure speed.
const loadTimeout = 5 * time.Minute

// Options declares what a backend cannot do. The zero value claims everything; each field
// skips, with a message saying why, the checks that need the capability.
type Options struct {
	// StreamScopedEventIDs: the backend recognizes a repeated event ID only within one stream
	// (KurrentDB deduplicates per stream and does not index IDs globally), so appending to one
	// stream an ID already stored in another is not reported as ErrIdempotencyConflict.
	StreamScopedEventIDs bool
	// NonAtomicAppendMulti: AppendMulti writes its parts one by one, so a failing part leaves
	// the parts before it written (KurrentDB through a client without multi-stream appends).
	NonAtomicAppendMulti bool
}

// Run runs the whole conformance suite against stores made by factory.
func Run(t *testing.T, factory Factory) {
	t.Helper()
	RunWithOptions(t, factory, Options{})
}

// RunWithOptions runs the suite, skipping the checks opts says the backend cannot pass.
func RunWithOptions(t *testing.T, factory Factory, opts Options) {
	t.Helper()
	s := &suite{factory: factory, opts: opts}
	t.Run("Append", func(t *testing.T) {
		t.Run("ExpectedRevision", s.testExpectedRevision)
		t.Run("ZeroEvents", s.testZeroEvents)
		t.Run("RoundTrip", s.testRoundTrip)
	})
	t.Run("AppendMulti", s.testAppendMulti)
	t.Run("Claims", s.testClaims)
	t.Run("ConcurrentAppendsOwnResults", s.testConcurrentAppendsOwnResults)
	t.Run("Idempotency", s.testIdempotency)
	t.Run("ReadStream", s.testReadStream)
	t.Run("ReadAll", s.testReadAll)
	t.Run("HeadPosition", s.testHeadPosition)
	t.Run("Subscribe", func(t *testing.T) {
		t.Run("CatchUpThenLive", s.testSubscribeCatchUpThenLive)
		t.Run("Resume", s.testSubscribeResume)
		t.Run("FromHead", s.testSubscribeFromHead)
		t.Run("Filters", s.testSubscribeFilters)
		t.Run("Close", s.testSubscribeClose)
		t.Run("ContextCancel", s.testSubscribeContextCancel)
		t.Run("StoreClose", s.testSubscribeStoreClose)
	})
	t.Run("ConcurrentAppendersLiveSubscriber", s.testConcurrency)
}

type suite struct {
	factory Factory
	opts    Options
}

// store makes a fresh store and closes it when the test ends.
func (s *suite) store(t *testing.T) eventstore.Store {
	t.Helper()
	st := s.factory(t)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// testContext is cancelled when the test ends, and at the latest after a generous deadline so
// a hung backend fails the test instead of the whole test binary.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// stream returns a stream name of category that no other test uses.
func stream(category string) string {
	return eventstore.StreamName(category, uuid.NewString())
}

var eventCounter atomic.Int64

// event returns a new event of type typ with distinct JSON data and metadata.
func event(typ string) eventstore.EventData {
	n := eventCounter.Add(1)
	return eventstore.EventData{
		ID:       uuid.New(),
		Type:     typ,
		Data:     fmt.Appendf(nil, `{"n": %d, "s": "data \u00e9"}`, n),
		Metadata: fmt.Appendf(nil, `{"m": %d}`, n),
	}
}

func events(typ string, n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = event(typ)
	}
	return out
}

func mustAppend(t *testing.T, st eventstore.Store, stream string, expected eventstore.ExpectedRevision, evs ...eventstore.EventData) eventstore.AppendResult {
	t.Helper()
	res, err := st.Append(testContext(t), stream, expected, evs...)
	if err != nil {
		t.Fatalf("append %d events to %s (expected %s): %v", len(evs), stream, expected, err)
	}
	return res
}

func mustReadStream(t *testing.T, st eventstore.Store, stream string) []eventstore.RecordedEvent {
	t.Helper()
	evs, err := st.ReadStream(testContext(t), stream, 0, 100_000)
	if err != nil {
		t.Fatalf("read stream %s: %v", stream, err)
	}
	return evs
}

// streamLen is the number of events in stream, 0 for a stream that does not exist.
func streamLen(t *testing.T, st eventstore.Store, stream string) int {
	t.Helper()
	evs, err := st.ReadStream(testContext(t), stream, 0, 100_000)
	if errors.Is(err, eventstore.ErrStreamNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("read stream %s: %v", stream, err)
	}
	return len(evs)
}

// jsonEqual compares JSON by value: a backend may store JSON in a normalized form (jsonb).
func jsonEqual(a, b []byte) bool {
	if len(bytes.TrimSpace(a)) == 0 || len(bytes.TrimSpace(b)) == 0 {
		return len(bytes.TrimSpace(a)) == len(bytes.TrimSpace(b))
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// checkRecorded compares a recorded event with what was appended.
func checkRecorded(t *testing.T, got eventstore.RecordedEvent, want eventstore.EventData, stream string, revision uint64) {
	t.Helper()
	if got.ID != want.ID || got.Type != want.Type || got.Stream != stream || got.Revision != revision {
		t.Fatalf("recorded event = {id %s type %s stream %s rev %d}, want {id %s type %s stream %s rev %d}",
			got.ID, got.Type, got.Stream, got.Revision, want.ID, want.Type, stream, revision)
	}
	if !jsonEqual(got.Data, want.Data) {
		t.Fatalf("event %s data = %s, want %s", got.ID, got.Data, want.Data)
	}
	if !jsonEqual(got.Metadata, want.Metadata) {
		t.Fatalf("event %s metadata = %s, want %s", got.ID, got.Metadata, want.Metadata)
	}
	if got.CreatedAt.IsZero() {
		t.Fatalf("event %s has no CreatedAt", got.ID)
	}
	if got.Position.IsStart() {
		t.Fatalf("event %s has the start position", got.ID)
	}
}

func ids(evs []eventstore.RecordedEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func dataIDs(evs []eventstore.EventData) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// checkIncreasing fails unless positions strictly increase.
func checkIncreasing(t *testing.T, evs []eventstore.RecordedEvent) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if !evs[i-1].Position.Less(evs[i].Position) {
			t.Fatalf("event %d at %s does not come after event %d at %s", i, evs[i].Position, i-1, evs[i-1].Position)
		}
	}
}

func sameIDs(t *testing.T, what string, got, want []uuid.UUID) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: event %d is %s, want %s", what, i, got[i], want[i])
		}
	}
}

// waitFor checks cond until it holds, failing the test at the deadline. Polling is for
// conditions no channel signals (what ReadAll or HeadPosition return).
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("wait for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("wait for %s: not reached after %s", what, waitTimeout)
		case <-tick.C:
		}
	}
}

// readAllVisible waits until ReadAll from Start with filter returns n events and returns them.
func readAllVisible(t *testing.T, st eventstore.Store, n int, filter eventstore.Filter) []eventstore.RecordedEvent {
	t.Helper()
	var got []eventstore.RecordedEvent
	waitFor(t, fmt.Sprintf("%d events in the log", n), func() (bool, error) {
		var err error
		got, err = st.ReadAll(testContext(t), eventstore.Start, n+100, filter)
		return len(got) >= n, err
	})
	if len(got) != n {
		t.Fatalf("ReadAll returned %d events, want %d", len(got), n)
	}
	return got
}

// receive reads n events from sub, failing at the deadline or if the subscription ends.
func receive(t *testing.T, sub eventstore.Subscription, n int) []eventstore.RecordedEvent {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	out := make([]eventstore.RecordedEvent, 0, n)
	for len(out) < n {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended after %d of %d events: %v", len(out), n, sub.Err())
			}
			out = append(out, ev)
		case <-deadline.C:
			t.Fatalf("received %d of %d events before the deadline", len(out), n)
		}
	}
	return out
}

// expectEnded drains sub until its channel closes and returns Err.
func expectEnded(t *testing.T, sub eventstore.Subscription) error {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		select {
		case _, ok := <-sub.Events():
			if !ok {
				return sub.Err()
			}
		case <-deadline.C:
			t.Fatalf("subscription still open after %s", waitTimeout)
		}
	}
}

func subscribe(t *testing.T, ctx context.Context, st eventstore.Store, from eventstore.Position, filter eventstore.Filter) eventstore.Subscription {
	t.Helper()
	sub, err := st.Subscribe(ctx, from, filter)
	if err != nil {
		t.Fatalf("subscribe from %s: %v", from, err)
	}
	t.Cleanup(sub.Close)
	return sub
}
