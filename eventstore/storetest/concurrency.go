package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
)

// testConcurrency runs concurrent appenders over many streams, with optimistic-concurrency
// conflicts and retries, while a live subscriber started beforehand must see every event
// exactly once, in strictly increasing position order, each stream's revisions in order.
func (s *suite) testConcurrency(t *testing.T) {
	const (
		appenders  = 8
		total      = 20_000
		numStreams = 500
	)
	st := s.store(t)
	ctx, cancel := context.WithTimeout(t.Context(), loadTimeout)
	defer cancel()
	sub := subscribe(t, ctx, st, eventstore.Start, eventstore.Filter{})

	type collected struct {
		events []eventstore.RecordedEvent
		err    error
	}
	done := make(chan collected, 1)
	go func() {
		evs := make([]eventstore.RecordedEvent, 0, total)
		deadline := time.NewTimer(loadTimeout)
		defer deadline.Stop()
		for len(evs) < total {
			select {
			case ev, ok := <-sub.Events():
				if !ok {
					done <- collected{evs, fmt.Errorf("subscription ended: %v", sub.Err())}
					return
				}
				evs = append(evs, ev)
			case <-deadline.C:
				done <- collected{evs, errors.New("deadline passed")}
				return
			}
		}
		done <- collected{evs, nil}
	}()

	names := make([]string, numStreams)
	for i := range names {
		names[i] = stream("conc")
	}
	var (
		wg        sync.WaitGroup
		conflicts atomic.Int64
		errs      = make(chan error, appenders)
		written   = make([][]uuid.UUID, appenders)
	)
	start := time.Now()
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(a), 0x5eed))
			// known is this appender's (possibly stale) idea of each stream's last revision,
			// -1 for "no stream"; stale knowledge is what produces conflicts.
			known := map[string]int64{}
			for quota := total / appenders; quota > 0; {
				name := names[rng.IntN(numStreams)]
				evs := events("Concurrent", min(1+rng.IntN(3), quota))
				mode := rng.IntN(4)
				for attempt := 0; ; attempt++ {
					rev, ok := known[name]
					if !ok {
						rev = -1
					}
					var exp eventstore.ExpectedRevision
					switch {
					case mode == 0:
						exp = eventstore.Any()
					case rev < 0:
						exp = eventstore.NoStream()
					case mode == 1:
						exp = eventstore.StreamExists()
					default:
						exp = eventstore.Exact(uint64(rev))
					}
					res, err := st.Append(ctx, name, exp, evs...)
					var wev *eventstore.WrongExpectedVersionError
					if errors.As(err, &wev) && attempt < 1000 {
						// Reload (here: learn the actual revision) and retry the same events.
						conflicts.Add(1)
						known[name] = -1
						if wev.HasActual {
							known[name] = int64(wev.Actual)
						}
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("appender %d: append to %s with %s (attempt %d): %w", a, name, exp, attempt, err)
						return
					}
					known[name] = int64(res.NextRevision)
					break
				}
				written[a] = append(written[a], dataIDs(evs)...)
				quota -= len(evs)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	appendTime := time.Since(start)

	got := <-done
	if got.err != nil {
		t.Fatalf("subscriber received %d of %d events: %v", len(got.events), total, got.err)
	}
	t.Logf("%d events in %s by %d appenders (%d conflicts retried); subscriber done %s after start",
		total, appendTime.Round(time.Millisecond), appenders, conflicts.Load(), time.Since(start).Round(time.Millisecond))
	if conflicts.Load() == 0 {
		t.Errorf("no append conflicted: the test did not exercise expected-revision retries")
	}

	want := make(map[uuid.UUID]bool, total)
	for _, w := range written {
		for _, id := range w {
			want[id] = true
		}
	}
	if len(want) != total {
		t.Fatalf("appenders wrote %d distinct events, want %d", len(want), total)
	}
	seen := make(map[uuid.UUID]bool, total)
	nextRev := make(map[string]uint64, numStreams)
	for i, ev := range got.events {
		if !want[ev.ID] {
			t.Fatalf("event %d (%s) was not appended by this test", i, ev.ID)
		}
		if seen[ev.ID] {
			t.Fatalf("event %s delivered twice", ev.ID)
		}
		seen[ev.ID] = true
		if i > 0 && !got.events[i-1].Position.Less(ev.Position) {
			t.Fatalf("event %d at %s does not come after event %d at %s", i, ev.Position, i-1, got.events[i-1].Position)
		}
		if ev.Revision != nextRev[ev.Stream] {
			t.Fatalf("event %d of %s has revision %d, want %d (stream revisions out of order)", i, ev.Stream, ev.Revision, nextRev[ev.Stream])
		}
		nextRev[ev.Stream]++
	}

	// Nothing beyond the appended events: a later event is the next one delivered.
	last := event("Last")
	mustAppend(t, st, stream("conc"), eventstore.NoStream(), last)
	if ev := receive(t, sub, 1)[0]; ev.ID != last.ID {
		t.Fatalf("after all %d events the subscriber got %s, want the final event %s", total, ev.ID, last.ID)
	}
	// The streams hold what the subscriber saw.
	for _, name := range names[:20] {
		if n := streamLen(t, st, name); uint64(n) != nextRev[name] {
			t.Fatalf("stream %s has %d events, subscriber saw %d", name, n, nextRev[name])
		}
	}
}
