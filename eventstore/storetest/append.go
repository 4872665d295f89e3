package storetest

import (
	"errors"
	"testing"

	"github.com/switchyard/switchyard/eventstore"
)

// checkWrongExpected fails unless err is a *WrongExpectedVersionError for stream carrying the
// given actual revision.
func checkWrongExpected(t *testing.T, err error, stream string, expected eventstore.ExpectedRevision, actual uint64, hasActual bool) {
	t.Helper()
	if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Fatalf("append with expected %s: err = %v, want ErrWrongExpectedVersion", expected, err)
	}
	var wev *eventstore.WrongExpectedVersionError
	if !errors.As(err, &wev) {
		t.Fatalf("append with expected %s: err %v (%T) is not a *WrongExpectedVersionError", expected, err, err)
	}
	if wev.Stream != stream {
		t.Errorf("WrongExpectedVersionError.Stream = %q, want %q", wev.Stream, stream)
	}
	if wev.Expected != expected {
		t.Errorf("WrongExpectedVersionError.Expected = %s, want %s", wev.Expected, expected)
	}
	if wev.HasActual != hasActual || (hasActual && wev.Actual != actual) {
		t.Errorf("WrongExpectedVersionError actual = (%d, has %v), want (%d, has %v)", wev.Actual, wev.HasActual, actual, hasActual)
	}
}

func (s *suite) testExpectedRevision(t *testing.T) {
	st := s.store(t)
	cases := []struct {
		name     string
		existing int // events in the stream before the append
		expected eventstore.ExpectedRevision
		ok       bool
		// On failure: the actual revision the error must carry.
		actual    uint64
		hasActual bool
	}{
		{name: "Any/NoStream", existing: 0, expected: eventstore.Any(), ok: true},
		{name: "Any/Existing", existing: 2, expected: eventstore.Any(), ok: true},
		{name: "NoStream/NoStream", existing: 0, expected: eventstore.NoStream(), ok: true},
		{name: "NoStream/Existing", existing: 2, expected: eventstore.NoStream(), actual: 1, hasActual: true},
		{name: "StreamExists/NoStream", existing: 0, expected: eventstore.StreamExists()},
		{name: "StreamExists/Existing", existing: 2, expected: eventstore.StreamExists(), ok: true},
		{name: "Exact/NoStream", existing: 0, expected: eventstore.Exact(0)},
		{name: "Exact/First", existing: 1, expected: eventstore.Exact(0), ok: true},
		{name: "Exact/Current", existing: 3, expected: eventstore.Exact(2), ok: true},
		{name: "Exact/Stale", existing: 3, expected: eventstore.Exact(1), actual: 2, hasActual: true},
		{name: "Exact/Ahead", existing: 2, expected: eventstore.Exact(5), actual: 1, hasActual: true},
		{name: "Exact/Huge", existing: 1, expected: eventstore.Exact(1 << 63), actual: 0, hasActual: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := stream("exp")
			var before eventstore.AppendResult
			if tc.existing > 0 {
				before = mustAppend(t, st, name, eventstore.NoStream(), events("Seeded", tc.existing)...)
			}
			evs := events("Appended", 2)
			res, err := st.Append(testContext(t), name, tc.expected, evs...)
			if !tc.ok {
				checkWrongExpected(t, err, name, tc.expected, tc.actual, tc.hasActual)
				if n := streamLen(t, st, name); n != tc.existing {
					t.Fatalf("failed append changed the stream: %d events, want %d", n, tc.existing)
				}
				return
			}
			if err != nil {
				t.Fatalf("append with expected %s to a stream of %d events: %v", tc.expected, tc.existing, err)
			}
			if want := uint64(tc.existing + 1); res.NextRevision != want {
				t.Errorf("NextRevision = %d, want %d", res.NextRevision, want)
			}
			got := mustReadStream(t, st, name)
			if len(got) != tc.existing+2 {
				t.Fatalf("stream has %d events, want %d", len(got), tc.existing+2)
			}
			for i, ev := range evs {
				checkRecorded(t, got[tc.existing+i], ev, name, uint64(tc.existing+i))
			}
			if last := got[len(got)-1].Position; res.Position != last {
				t.Errorf("AppendResult.Position = %s, want the last event's %s", res.Position, last)
			}
			if tc.existing > 0 && !before.Position.Less(res.Position) {
				t.Errorf("second append at %s does not come after the first at %s", res.Position, before.Position)
			}
		})
	}
}

func (s *suite) testZeroEvents(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)

	missing := stream("zero")
	for _, exp := range []eventstore.ExpectedRevision{eventstore.Any(), eventstore.NoStream()} {
		if _, err := st.Append(ctx, missing, exp); err != nil {
			t.Fatalf("append no events to a missing stream with %s: %v", exp, err)
		}
	}
	for _, exp := range []eventstore.ExpectedRevision{eventstore.StreamExists(), eventstore.Exact(0)} {
		_, err := st.Append(ctx, missing, exp)
		checkWrongExpected(t, err, missing, exp, 0, false)
	}
	if _, err := st.ReadStream(ctx, missing, 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("appending no events created the stream: ReadStream err = %v", err)
	}

	existing := stream("zero")
	mustAppend(t, st, existing, eventstore.NoStream(), events("Seeded", 2)...)
	for _, exp := range []eventstore.ExpectedRevision{eventstore.Any(), eventstore.StreamExists(), eventstore.Exact(1)} {
		res, err := st.Append(ctx, existing, exp)
		if err != nil {
			t.Fatalf("append no events to a 2-event stream with %s: %v", exp, err)
		}
		if res.NextRevision != 1 {
			t.Errorf("append no events with %s: NextRevision = %d, want 1", exp, res.NextRevision)
		}
	}
	for _, exp := range []eventstore.ExpectedRevision{eventstore.NoStream(), eventstore.Exact(0), eventstore.Exact(2)} {
		_, err := st.Append(ctx, existing, exp)
		checkWrongExpected(t, err, existing, exp, 1, true)
	}
	if n := streamLen(t, st, existing); n != 2 {
		t.Fatalf("appending no events changed the stream: %d events, want 2", n)
	}
}

func (s *suite) testRoundTrip(t *testing.T) {
	st := s.store(t)
	name := stream("roundtrip")
	evs := events("RoundTripped", 3)
	evs[1].Metadata = nil // metadata is optional
	evs[2].Data = []byte(`{"nested": {"list": [1, 2.5, "three", null, true]}, "empty": {}}`)
	res := mustAppend(t, st, name, eventstore.NoStream(), evs...)
	got := mustReadStream(t, st, name)
	if len(got) != len(evs) {
		t.Fatalf("stream has %d events, want %d", len(got), len(evs))
	}
	for i, ev := range evs {
		checkRecorded(t, got[i], ev, name, uint64(i))
		if got[i].Category() != "roundtrip" {
			t.Errorf("Category() = %q, want roundtrip", got[i].Category())
		}
	}
	checkIncreasing(t, got)
	if res.NextRevision != 2 || res.Position != got[2].Position {
		t.Errorf("AppendResult = %+v, want revision 2 at %s", res, got[2].Position)
	}
}

// testIdempotency: a repeated append of the same event ids succeeds without writing and
// reports where the events are; ids that are only partly, or differently, stored conflict.
func (s *suite) testIdempotency(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)

	t.Run("SameExpectation", func(t *testing.T) {
		name := stream("idem")
		evs := events("Charged", 2)
		first := mustAppend(t, st, name, eventstore.NoStream(), evs...)
		again := mustAppend(t, st, name, eventstore.NoStream(), evs...)
		if again != first {
			t.Errorf("repeated append = %+v, want the first result %+v", again, first)
		}
		if n := streamLen(t, st, name); n != 2 {
			t.Fatalf("repeated append wrote: stream has %d events, want 2", n)
		}
	})

	t.Run("Any", func(t *testing.T) {
		name := stream("idem")
		evs := events("Charged", 2)
		first := mustAppend(t, st, name, eventstore.NoStream(), evs...)
		again := mustAppend(t, st, name, eventstore.Any(), evs...)
		if again != first {
			t.Errorf("repeated append with Any = %+v, want the first result %+v", again, first)
		}
		if n := streamLen(t, st, name); n != 2 {
			t.Fatalf("repeated append wrote: stream has %d events, want 2", n)
		}
	})

	t.Run("AfterTheStreamMovedOn", func(t *testing.T) {
		name := stream("idem")
		e1, e23, e4 := events("A", 1), events("B", 2), events("C", 1)
		r1 := mustAppend(t, st, name, eventstore.NoStream(), e1...)
		r23 := mustAppend(t, st, name, eventstore.Exact(0), e23...)
		mustAppend(t, st, name, eventstore.Any(), e4...)
		if got := mustAppend(t, st, name, eventstore.Exact(0), e23...); got != r23 {
			t.Errorf("repeat of the Exact(0) append = %+v, want %+v", got, r23)
		}
		if got := mustAppend(t, st, name, eventstore.NoStream(), e1...); got != r1 {
			t.Errorf("repeat of the NoStream append = %+v, want %+v", got, r1)
		}
		if n := streamLen(t, st, name); n != 4 {
			t.Fatalf("repeated appends wrote: stream has %d events, want 4", n)
		}
	})

	t.Run("PartialOverlap", func(t *testing.T) {
		name := stream("idem")
		evs := events("Charged", 2)
		mustAppend(t, st, name, eventstore.NoStream(), evs...)
		_, err := st.Append(ctx, name, eventstore.Any(), evs[1], event("New"))
		if !errors.Is(err, eventstore.ErrIdempotencyConflict) {
			t.Fatalf("append of one stored and one new id: err = %v, want ErrIdempotencyConflict", err)
		}
		if n := streamLen(t, st, name); n != 2 {
			t.Fatalf("conflicting append wrote: stream has %d events, want 2", n)
		}
	})

	t.Run("Reordered", func(t *testing.T) {
		name := stream("idem")
		evs := events("Charged", 2)
		mustAppend(t, st, name, eventstore.NoStream(), evs...)
		_, err := st.Append(ctx, name, eventstore.Any(), evs[1], evs[0])
		if !errors.Is(err, eventstore.ErrIdempotencyConflict) {
			t.Fatalf("append of stored ids in another order: err = %v, want ErrIdempotencyConflict", err)
		}
		if n := streamLen(t, st, name); n != 2 {
			t.Fatalf("conflicting append wrote: stream has %d events, want 2", n)
		}
	})

	t.Run("OtherStream", func(t *testing.T) {
		if s.opts.StreamScopedEventIDs {
			t.Skip("backend declares StreamScopedEventIDs: event IDs are not unique across streams")
		}
		name, other := stream("idem"), stream("idem")
		evs := events("Charged", 1)
		mustAppend(t, st, name, eventstore.NoStream(), evs...)
		_, err := st.Append(ctx, other, eventstore.Any(), evs...)
		if !errors.Is(err, eventstore.ErrIdempotencyConflict) {
			t.Fatalf("append of an id stored in another stream: err = %v, want ErrIdempotencyConflict", err)
		}
		if n := streamLen(t, st, other); n != 0 {
			t.Fatalf("conflicting append wrote %d events", n)
		}
		// The same into a stream that already exists.
		mustAppend(t, st, other, eventstore.NoStream(), event("Own"))
		_, err = st.Append(ctx, other, eventstore.Any(), evs...)
		if !errors.Is(err, eventstore.ErrIdempotencyConflict) {
			t.Fatalf("append of an id stored in another stream to an existing stream: err = %v, want ErrIdempotencyConflict", err)
		}
		if n := streamLen(t, st, other); n != 1 {
			t.Fatalf("conflicting append wrote: stream has %d events, want 1", n)
		}
	})
}
