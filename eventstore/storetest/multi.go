package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/eventstore"
)

func (s *suite) testAppendMulti(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	existing := stream("multi")
	mustAppend(t, st, existing, eventstore.NoStream(), events("Seeded", 2)...)
	fresh, other := stream("multi"), stream("other")
	parts := []eventstore.StreamAppend{
		{Stream: fresh, Expected: eventstore.NoStream(), Events: events("Created", 2)},
		{Stream: existing, Expected: eventstore.Exact(1), Events: events("Moved", 1)},
		{Stream: other, Expected: eventstore.Any(), Events: events("Noted", 3)},
	}
	res, err := st.AppendMulti(ctx, parts...)
	if err != nil {
		t.Fatalf("append multi: %v", err)
	}
	wantRev := []uint64{1, 2, 2}
	if len(res) != len(parts) {
		t.Fatalf("append multi: %d results, want %d", len(res), len(parts))
	}
	for i, p := range parts {
		if res[i].NextRevision != wantRev[i] {
			t.Errorf("part %d (%s): next revision %d, want %d", i, p.Stream, res[i].NextRevision, wantRev[i])
		}
		got := mustReadStream(t, st, p.Stream)
		last := got[len(got)-1]
		if last.ID != p.Events[len(p.Events)-1].ID || last.Position != res[i].Position {
			t.Errorf("part %d (%s): last event %s at %s, result says %s; want the part's last event %s", i, p.Stream, last.ID, last.Position, res[i].Position, p.Events[len(p.Events)-1].ID)
		}
	}

	t.Run("IdempotentRepeat", func(t *testing.T) {
		again, err := st.AppendMulti(ctx, parts...)
		if err != nil {
			t.Fatalf("repeat append multi: %v", err)
		}
		for i := range parts {
			if again[i] != res[i] {
				t.Errorf("repeat part %d: result %+v, want the first call's %+v", i, again[i], res[i])
			}
		}
		if n := streamLen(t, st, fresh); n != 2 {
			t.Errorf("%s holds %d events after the repeat, want 2", fresh, n)
		}
	})

	t.Run("OneStreamTwice", func(t *testing.T) {
		name := stream("multi")
		r, err := st.AppendMulti(ctx,
			eventstore.StreamAppend{Stream: name, Expected: eventstore.NoStream(), Events: events("A", 1)},
			eventstore.StreamAppend{Stream: name, Expected: eventstore.Exact(0), Events: events("B", 2)})
		if err != nil {
			t.Fatalf("append multi to one stream twice: %v", err)
		}
		if r[0].NextRevision != 0 || r[1].NextRevision != 2 || !r[0].Position.Less(r[1].Position) {
			t.Errorf("results %+v, want revisions 0 then 2 in increasing positions", r)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		r, err := st.AppendMulti(ctx)
		if err != nil || len(r) != 0 {
			t.Errorf("append multi of nothing: %v, %v; want no results and no error", r, err)
		}
	})

	t.Run("WrongExpectedVersionWritesNothing", func(t *testing.T) {
		if s.opts.NonAtomicAppendMulti {
			t.Skip("backend declares AppendMulti non-atomic (Options.NonAtomicAppendMulti)")
		}
		first := stream("multi")
		_, err := st.AppendMulti(ctx,
			eventstore.StreamAppend{Stream: first, Expected: eventstore.NoStream(), Events: events("Created", 1)},
			eventstore.StreamAppend{Stream: existing, Expected: eventstore.Exact(0), Events: events("Moved", 1)})
		checkWrongExpected(t, err, existing, eventstore.Exact(0), 2, true)
		if n := streamLen(t, st, first); n != 0 {
			t.Errorf("%s holds %d events after a refused AppendMulti, want none", first, n)
		}
		if n := streamLen(t, st, existing); n != 3 {
			t.Errorf("%s holds %d events after a refused AppendMulti, want 3", existing, n)
		}
	})

	t.Run("CheckOnly", func(t *testing.T) {
		// A part without events checks its stream's revision (a trigger's workflow) beside the
		// parts that write; put first, it refuses the call before any part writes, on every
		// backend.
		head := uint64(streamLen(t, st, existing) - 1)
		made := stream("multi")
		r, err := st.AppendMulti(ctx,
			eventstore.StreamAppend{Stream: existing, Expected: eventstore.Exact(head)},
			eventstore.StreamAppend{Stream: made, Expected: eventstore.NoStream(), Events: events("Created", 1)})
		if err != nil {
			t.Fatalf("append multi with a check that holds: %v", err)
		}
		if r[0].NextRevision != head {
			t.Errorf("check's result: revision %d, want %d", r[0].NextRevision, head)
		}
		if n := streamLen(t, st, made); n != 1 {
			t.Errorf("%s holds %d events beside a check that held, want 1", made, n)
		}
		refused := stream("multi")
		_, err = st.AppendMulti(ctx,
			eventstore.StreamAppend{Stream: existing, Expected: eventstore.Exact(head - 1)},
			eventstore.StreamAppend{Stream: refused, Expected: eventstore.NoStream(), Events: events("Created", 1)})
		checkWrongExpected(t, err, existing, eventstore.Exact(head-1), head, true)
		if n := streamLen(t, st, refused); n != 0 {
			t.Errorf("%s holds %d events beside a check that failed, want none", refused, n)
		}
		if n := streamLen(t, st, existing); uint64(n) != head+1 {
			t.Errorf("a check changed %s: %d events, want %d", existing, n, head+1)
		}
	})

	t.Run("WrongExpectedVersionNamesPart", func(t *testing.T) {
		// Backends that are not atomic still name the failing part's stream.
		_, err := st.AppendMulti(ctx,
			eventstore.StreamAppend{Stream: existing, Expected: eventstore.NoStream(), Events: events("Moved", 1)})
		checkWrongExpected(t, err, existing, eventstore.NoStream(), 2, true)
	})
}

// testConcurrentAppendsOwnResults checks what group commit must keep: concurrent appends each
// get their own result, and one that fails its expectation fails alone.
func (s *suite) testConcurrentAppendsOwnResults(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	contended := stream("group")
	mustAppend(t, st, contended, eventstore.NoStream(), event("Seeded"))
	const n = 48
	type outcome struct {
		stream string
		ev     eventstore.EventData
		res    eventstore.AppendResult
		err    error
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := outcome{stream: stream("group"), ev: event("Grouped")}
			expected := eventstore.NoStream()
			switch i % 3 {
			case 1: // every one of these races for revision 1 of one stream: one wins
				o.stream, expected = contended, eventstore.Exact(0)
			case 2: // cannot hold
				o.stream, expected = contended, eventstore.NoStream()
			}
			<-start
			o.res, o.err = st.Append(ctx, o.stream, expected, o.ev)
			out[i] = o
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for i, o := range out {
		switch i % 3 {
		case 0:
			if o.err != nil {
				t.Errorf("append %d to a fresh stream failed beside failing neighbours: %v", i, o.err)
				continue
			}
			got := mustReadStream(t, st, o.stream)
			if len(got) != 1 || got[0].ID != o.ev.ID || got[0].Position != o.res.Position || o.res.NextRevision != 0 {
				t.Errorf("append %d: result %+v does not describe its own event %s (stream holds %d)", i, o.res, o.ev.ID, len(got))
			}
		case 1:
			if o.err == nil {
				wins++
				if o.res.NextRevision != 1 {
					t.Errorf("winning append %d: next revision %d, want 1", i, o.res.NextRevision)
				}
			} else if !errors.Is(o.err, eventstore.ErrWrongExpectedVersion) {
				t.Errorf("losing append %d: %v, want ErrWrongExpectedVersion", i, o.err)
			}
		case 2:
			if !errors.Is(o.err, eventstore.ErrWrongExpectedVersion) {
				t.Errorf("append %d expecting no stream on an existing one: %v, want ErrWrongExpectedVersion", i, o.err)
			}
		}
	}
	if wins != 1 {
		t.Errorf("%d appends won revision 1 of %s, want exactly 1", wins, contended)
	}
	if got := streamLen(t, st, contended); got != 2 {
		t.Errorf("%s holds %d events, want 2 (seed and the one winner)", contended, got)
	}
}
