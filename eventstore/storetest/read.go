package storetest

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
)

func (s *suite) testReadStream(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	name := stream("paged")
	evs := events("Paged", 10)
	mustAppend(t, st, name, eventstore.NoStream(), evs[:4]...)
	mustAppend(t, st, stream("paged"), eventstore.NoStream(), events("Other", 3)...) // interleaved
	mustAppend(t, st, name, eventstore.Exact(3), evs[4:]...)

	pages := []struct {
		from      uint64
		max       int
		wantFirst int
		wantLen   int
	}{
		{0, 3, 0, 3},
		{3, 3, 3, 3},
		{6, 3, 6, 3},
		{9, 5, 9, 1},
		{0, 100, 0, 10},
		{10, 5, 0, 0}, // past the end of an existing stream: empty, not an error
		{1 << 62, 5, 0, 0},
	}
	for _, p := range pages {
		got, err := st.ReadStream(ctx, name, p.from, p.max)
		if err != nil {
			t.Fatalf("ReadStream(from %d, max %d): %v", p.from, p.max, err)
		}
		if len(got) != p.wantLen {
			t.Fatalf("ReadStream(from %d, max %d) returned %d events, want %d", p.from, p.max, len(got), p.wantLen)
		}
		for i, ev := range got {
			checkRecorded(t, ev, evs[p.wantFirst+i], name, uint64(p.wantFirst+i))
		}
		checkIncreasing(t, got)
	}

	// Paging through the stream gives the whole stream.
	var all []eventstore.RecordedEvent
	for from := uint64(0); ; {
		page, err := st.ReadStream(ctx, name, from, 4)
		if err != nil {
			t.Fatalf("ReadStream(from %d, max 4): %v", from, err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		from = page[len(page)-1].Revision + 1
	}
	sameIDs(t, "paged stream", ids(all), dataIDs(evs))

	if _, err := st.ReadStream(ctx, stream("paged"), 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("ReadStream of an unknown stream: err = %v, want ErrStreamNotFound", err)
	}
}

// logFixture appends, one append after another, events of two categories and three types, and
// returns them in append order (which is log order, as each append finished before the next).
func logFixture(t *testing.T, st eventstore.Store) (all []eventstore.EventData, alpha1, beta, alpha2 string) {
	alpha1, beta, alpha2 = stream("alpha"), stream("beta"), stream("alpha")
	plan := []struct {
		stream string
		evs    []eventstore.EventData
	}{
		{alpha1, []eventstore.EventData{event("A"), event("B")}},
		{beta, []eventstore.EventData{event("A")}},
		{alpha2, []eventstore.EventData{event("B")}},
		{beta, []eventstore.EventData{event("C"), event("A"), event("C")}},
		{alpha1, []eventstore.EventData{event("A")}},
		{alpha2, []eventstore.EventData{event("C")}},
	}
	for _, p := range plan {
		mustAppend(t, st, p.stream, eventstore.Any(), p.evs...)
		all = append(all, p.evs...)
	}
	return all, alpha1, beta, alpha2
}

// expectedLog returns the ids of the appended events that pass filter, in order.
func expectedLog(all []eventstore.EventData, streams map[uuid.UUID]string, filter eventstore.Filter) []uuid.UUID {
	var out []uuid.UUID
	for _, e := range all {
		if filter.Matches(eventstore.RecordedEvent{Stream: streams[e.ID], Type: e.Type}) {
			out = append(out, e.ID)
		}
	}
	return out
}

func streamsOf(t *testing.T, got []eventstore.RecordedEvent) map[uuid.UUID]string {
	t.Helper()
	m := make(map[uuid.UUID]string, len(got))
	for _, e := range got {
		m[e.ID] = e.Stream
	}
	return m
}

var fixtureFilters = []struct {
	name   string
	filter eventstore.Filter
}{
	{"Category", eventstore.Filter{Categories: []string{"alpha"}}},
	{"Categories", eventstore.Filter{Categories: []string{"alpha", "beta"}}},
	{"Type", eventstore.Filter{Types: []string{"A"}}},
	{"Types", eventstore.Filter{Types: []string{"B", "C"}}},
	{"CategoryAndType", eventstore.Filter{Categories: []string{"beta"}, Types: []string{"A"}}},
	{"NoMatch", eventstore.Filter{Categories: []string{"gamma"}}},
}

func (s *suite) testReadAll(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)

	if got, err := st.ReadAll(ctx, eventstore.Start, 10, eventstore.Filter{}); err != nil || len(got) != 0 {
		t.Fatalf("ReadAll of an empty store = %d events, %v; want none", len(got), err)
	}

	all, alpha1, beta, alpha2 := logFixture(t, st)
	got := readAllVisible(t, st, len(all), eventstore.Filter{})
	sameIDs(t, "ReadAll from Start", ids(got), dataIDs(all))
	checkIncreasing(t, got)
	streams := streamsOf(t, got)
	revs := map[string]uint64{}
	for i, ev := range got {
		if ev.Stream != alpha1 && ev.Stream != beta && ev.Stream != alpha2 {
			t.Fatalf("event %d has stream %q", i, ev.Stream)
		}
		checkRecorded(t, ev, all[i], ev.Stream, revs[ev.Stream])
		revs[ev.Stream]++
	}

	t.Run("Paging", func(t *testing.T) {
		var paged []eventstore.RecordedEvent
		for from := eventstore.Start; ; {
			page, err := st.ReadAll(ctx, from, 2, eventstore.Filter{})
			if err != nil {
				t.Fatalf("ReadAll(from %s, max 2): %v", from, err)
			}
			if len(page) > 2 {
				t.Fatalf("ReadAll(max 2) returned %d events", len(page))
			}
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			from = page[len(page)-1].Position
		}
		sameIDs(t, "paged ReadAll", ids(paged), dataIDs(all))
	})

	t.Run("FromMiddle", func(t *testing.T) {
		for _, i := range []int{0, 3, len(got) - 2} {
			rest, err := st.ReadAll(ctx, got[i].Position, 100, eventstore.Filter{})
			if err != nil {
				t.Fatalf("ReadAll(from event %d): %v", i, err)
			}
			sameIDs(t, "ReadAll strictly after a position", ids(rest), ids(got[i+1:]))
		}
		rest, err := st.ReadAll(ctx, got[len(got)-1].Position, 100, eventstore.Filter{})
		if err != nil || len(rest) != 0 {
			t.Fatalf("ReadAll after the last event = %d events, %v; want none", len(rest), err)
		}
	})

	t.Run("Filters", func(t *testing.T) {
		for _, f := range fixtureFilters {
			want := expectedLog(all, streams, f.filter)
			got, err := st.ReadAll(ctx, eventstore.Start, 100, f.filter)
			if err != nil {
				t.Fatalf("%s: ReadAll: %v", f.name, err)
			}
			sameIDs(t, f.name, ids(got), want)
			// Paging one event at a time through a filtered log skips nothing.
			var paged []eventstore.RecordedEvent
			for from := eventstore.Start; ; {
				page, err := st.ReadAll(ctx, from, 1, f.filter)
				if err != nil {
					t.Fatalf("%s: ReadAll(from %s, max 1): %v", f.name, from, err)
				}
				if len(page) == 0 {
					break
				}
				paged = append(paged, page...)
				from = page[0].Position
			}
			sameIDs(t, f.name+" paged", ids(paged), want)
		}
	})
}

func (s *suite) testHeadPosition(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	head, err := st.HeadPosition(ctx)
	if err != nil {
		t.Fatalf("HeadPosition of an empty store: %v", err)
	}
	if !head.IsStart() {
		t.Fatalf("HeadPosition of an empty store = %s, want Start", head)
	}
	var prev eventstore.Position
	for i := range 3 {
		res := mustAppend(t, st, stream("head"), eventstore.NoStream(), events("Headed", i+1)...)
		waitFor(t, "head at the last append", func() (bool, error) {
			head, err := st.HeadPosition(ctx)
			if err != nil {
				return false, err
			}
			if res.Position.Less(head) {
				t.Fatalf("HeadPosition %s is after the last event %s", head, res.Position)
			}
			return head == res.Position, nil
		})
		if !prev.Less(res.Position) {
			t.Fatalf("append %d at %s is not after the previous one at %s", i, res.Position, prev)
		}
		prev = res.Position
	}
	got, err := st.ReadAll(ctx, eventstore.Start, 100, eventstore.Filter{})
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if len(got) != 6 {
		t.Fatalf("ReadAll returned %d events, want 6", len(got))
	}
	if last := got[len(got)-1].Position; last != prev {
		t.Fatalf("ReadAll ends at %s, want the head %s", last, prev)
	}
}
