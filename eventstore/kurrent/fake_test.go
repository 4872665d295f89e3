package kurrent

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	api "github.com/EventStore/EventStore-Client-Go/v4/protos/streams"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/storetest"
)

// These tests drive the store through the real esdb client against fakeServer (fakeserver_test.go),
// an in-memory stand-in for a KurrentDB node: they check how the store uses the client (requests,
// error values, streams of responses), not KurrentDB itself, which the conformance run against a
// real server (store_test.go, KURRENTDB_URL) does.

func newFakeStore(t *testing.T, f *fakeServer, opts Config) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, f.url(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func fakeEvents(typ string, n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte(`{"i":1}`)}
	}
	return out
}

// TestConformanceAgainstFake runs the whole conformance suite against the fake, so that every
// run (CI included) drives the KurrentDB store through its real client even without a server.
// The fake models KurrentDB as read in its sources and, like KurrentDB, recognizes a repeated
// event ID only within one stream (StreamScopedEventIDs; docs/kurrentdb.md).
func TestConformanceAgainstFake(t *testing.T) {
	f := startFakeServer(t)
	storetest.RunWithOptions(t, func(t *testing.T) eventstore.Store {
		return newFakeStoreUnclosed(t, f, Config{StreamPrefix: "t" + uuid.NewString()[:8] + "_"})
	}, storetest.Options{StreamScopedEventIDs: true, NonAtomicAppendMulti: true})
}

// newFakeStoreUnclosed is newFakeStore for the suite, which closes its stores itself.
func newFakeStoreUnclosed(t *testing.T, f *fakeServer, opts Config) *Store {
	t.Helper()
	s, err := New(context.Background(), f.url(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestFakeAppendErrors(t *testing.T) {
	f := startFakeServer(t)
	s := newFakeStore(t, f, Config{StreamPrefix: "p_"})
	ctx := context.Background()

	evs := fakeEvents("A", 3)
	res, err := s.Append(ctx, "exec-1", eventstore.NoStream(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	if f.count("p_exec-1") != 3 {
		t.Fatalf("the prefix was not applied on write")
	}

	// The actual revision comes from the client's own wrong-expected-version error.
	_, err = s.Append(ctx, "exec-1", eventstore.Exact(0), fakeEvents("B", 1)...)
	var wev *eventstore.WrongExpectedVersionError
	if !errors.As(err, &wev) || !wev.HasActual || wev.Actual != 2 || wev.Stream != "exec-1" || wev.Expected != eventstore.Exact(0) {
		t.Fatalf("stale append: err = %#v", err)
	}
	_, err = s.Append(ctx, "exec-2", eventstore.StreamExists(), fakeEvents("B", 1)...)
	if !errors.As(err, &wev) || wev.HasActual {
		t.Fatalf("StreamExists on a missing stream: err = %#v", err)
	}

	// A repeat is idempotent and reports the first result.
	again, err := s.Append(ctx, "exec-1", eventstore.NoStream(), evs...)
	if err != nil || again != res {
		t.Fatalf("repeat = %+v, %v; want %+v", again, err, res)
	}
	// The first events stored, the last new: a conflict, not a wrong version.
	_, err = s.Append(ctx, "exec-1", eventstore.NoStream(), evs[0], fakeEvents("C", 1)[0])
	if !errors.Is(err, eventstore.ErrIdempotencyConflict) || errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Fatalf("partial repeat with NoStream: err = %v", err)
	}
	_, err = s.Append(ctx, "exec-1", eventstore.Any(), evs[2], evs[1])
	if !errors.Is(err, eventstore.ErrIdempotencyConflict) {
		t.Fatalf("reordered repeat with Any: err = %v", err)
	}
	if f.count("p_exec-1") != 3 {
		t.Fatalf("a refused append wrote: %d events", f.count("p_exec-1"))
	}

	if _, err := s.ReadStream(ctx, "exec-9", 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("ReadStream of a missing stream: %v", err)
	}
	if got, err := s.ReadStream(ctx, "exec-1", 1<<63, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReadStream past int64 revisions = %d, %v", len(got), err)
	}
	if _, err := s.ReadStream(ctx, "exec-9", 1<<63, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("ReadStream past int64 revisions of a missing stream: %v", err)
	}
}

func TestFakeLegacyStreamPositions(t *testing.T) {
	f := startFakeServer(t)
	f.legacyStreamPositions = true
	s := newFakeStore(t, f, Config{})
	ctx := context.Background()
	res, err := s.Append(ctx, "exec-1", eventstore.Any(), fakeEvents("A", 2)...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadStream(ctx, "exec-1", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got[1].Position != res.Position {
		t.Fatalf("stream read position %v, append position %v", got[1].Position, res.Position)
	}
	all, err := s.ReadAll(ctx, eventstore.Start, 10, eventstore.Filter{})
	if err != nil || len(all) != 2 || all[1].Position != got[1].Position {
		t.Fatalf("ReadAll = %+v, %v", all, err)
	}
}

func TestFakeReadAll(t *testing.T) {
	f := startFakeServer(t)
	s := newFakeStore(t, f, Config{StreamPrefix: "p_", ReadBatchSize: 2})
	other := newFakeStore(t, f, Config{StreamPrefix: "q_"})
	ctx := context.Background()
	var want []uuid.UUID
	for i := range 5 {
		evs := fakeEvents("A", i%3+1)
		if _, err := s.Append(ctx, eventstore.StreamName("exec", uuid.NewString()), eventstore.NoStream(), evs...); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Append(ctx, "exec-x", eventstore.Any(), fakeEvents("A", 1)...); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			want = append(want, e.ID)
		}
	}
	// Small pages, system and foreign events in between: still every event, once, in order.
	var got []uuid.UUID
	for from := eventstore.Start; ; {
		page, err := s.ReadAll(ctx, from, 3, eventstore.Filter{Categories: []string{"exec"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			got = append(got, e.ID)
			if e.Stream[:5] != "exec-" {
				t.Fatalf("stream %q kept its prefix", e.Stream)
			}
		}
		from = page[len(page)-1].Position
	}
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("event %d = %s, want %s", i, got[i], want[i])
		}
	}
	head, err := s.HeadPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := s.ReadAll(ctx, eventstore.Start, 100, eventstore.Filter{})
	if head != last[len(last)-1].Position {
		t.Fatalf("HeadPosition = %v, want the last event of the prefix %v", head, last[len(last)-1].Position)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestFakeSubscriptionSurvivesDrops(t *testing.T) {
	f := startFakeServer(t)
	s := newFakeStore(t, f, Config{SubscriptionBuffer: 1})
	ctx := context.Background()
	sub, err := s.Subscribe(ctx, eventstore.Start, eventstore.Filter{Types: []string{"A"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var want []uuid.UUID
	for i := range 20 {
		evs := fakeEvents("A", 2)
		if _, err := s.Append(ctx, "exec-1", eventstore.Any(), append(evs, fakeEvents("B", 1)...)...); err != nil {
			t.Fatal(err)
		}
		want = append(want, evs[0].ID, evs[1].ID)
		if i%4 == 1 {
			f.dropSubscriptions() // the node restarts: the store resubscribes after the last event seen
		}
	}
	deadline := time.After(30 * time.Second)
	for i, id := range want {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended after %d events: %v", i, sub.Err())
			}
			if ev.ID != id {
				t.Fatalf("event %d = %s (%s), want %s", i, ev.ID, ev.Type, id)
			}
		case <-deadline:
			t.Fatalf("received %d of %d events", i, len(want))
		}
	}
	sub.Close()
	if _, ok := <-sub.Events(); ok {
		t.Fatal("events after Close")
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("Err after Close = %v", err)
	}
}

func TestFakeSubscriptionEndsWithError(t *testing.T) {
	f := startFakeServer(t)
	s := newFakeStore(t, f, Config{MaxResubscribeAttempts: -1})
	sub, err := s.Subscribe(context.Background(), eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	f.dropSubscriptions()
	select {
	case _, ok := <-sub.Events():
		if ok {
			t.Fatal("unexpected event")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("subscription still open after the drop")
	}
	if err := sub.Err(); err == nil || errors.Is(err, eventstore.ErrClosed) {
		t.Fatalf("Err after a drop without resubscription = %v", err)
	}
}

func TestFakeStoreCloseEndsSubscription(t *testing.T) {
	f := startFakeServer(t)
	s := newFakeStore(t, f, Config{})
	sub, err := s.Subscribe(context.Background(), eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ok := <-sub.Events(); ok {
		t.Fatal("event after the store closed")
	}
	if err := sub.Err(); !errors.Is(err, eventstore.ErrClosed) {
		t.Fatalf("Err after the store closed = %v, want ErrClosed", err)
	}
	sub.Close()
}

func TestFakeNodeOutage(t *testing.T) {
	f := startFakeServer(t)
	s := newFakeStore(t, f, Config{})
	ctx := context.Background()
	if _, err := s.Append(ctx, "exec-1", eventstore.NoStream(), fakeEvents("A", 1)...); err != nil {
		t.Fatal(err)
	}
	first := s.currentClient()

	// The node goes away: calls fail, and the client, failing to rediscover it, shuts itself down.
	// (A failed append makes the client rediscover the node; reads leave reconnection to gRPC.)
	f.srv.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for s.currentClient() == first {
		if time.Now().After(deadline) {
			t.Fatal("the store kept the dead client")
		}
		if _, err := s.Append(ctx, "exec-1", eventstore.Any(), fakeEvents("A", 1)...); err == nil {
			t.Fatal("append succeeded without a node")
		}
	}

	// The node is back at the same address: the store works again with its new client.
	lis, err := net.Listen("tcp", f.addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", f.addr, err)
	}
	f.srv = grpc.NewServer()
	api.RegisterStreamsServer(f.srv, f)
	go f.srv.Serve(lis)
	t.Cleanup(f.srv.Stop)
	if got, err := s.ReadStream(ctx, "exec-1", 0, 10); err != nil || len(got) != 1 { // the failed appends wrote nothing
		t.Fatalf("after the node came back: %d events, %v", len(got), err)
	}
}
