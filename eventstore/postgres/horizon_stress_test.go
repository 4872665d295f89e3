package postgres

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
)

// TestSubscriberSeesEveryMixedAppend: grouped appends, slow-path appends (expectations that
// fail, then succeed on retry) and AppendMulti race while a live subscription reads through the
// shared tail; it must deliver every committed event once, in increasing position order.
func TestSubscriberSeesEveryMixedAppend(t *testing.T) {
	pool, _ := newMigratedDB(t, 16)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	sub, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var (
		mu        sync.Mutex
		committed = map[uuid.UUID]bool{}
		wg        sync.WaitGroup
	)
	record := func(evs ...eventstore.EventData) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			committed[ev.ID] = true
		}
	}
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				switch i % 3 {
				case 0: // grouped
					ev := event("Grouped")
					if _, err := st.Append(ctx, fmt.Sprintf("mixed-%d-%d", g, i), eventstore.Any(), ev); err != nil {
						t.Error(err)
						return
					}
					record(ev)
				case 1: // contended: stale expectations take the slow path, retried with Any
					ev := event("Contended")
					name := fmt.Sprintf("contended-%d", i%4)
					if _, err := st.Append(ctx, name, eventstore.Exact(uint64(i)), ev); err == nil {
						record(ev)
					} else if _, err := st.Append(ctx, name, eventstore.Any(), ev); err != nil {
						t.Error(err)
						return
					} else {
						record(ev)
					}
				case 2: // several streams at once
					a, b := event("MultiA"), event("MultiB")
					if _, err := st.AppendMulti(ctx,
						eventstore.StreamAppend{Stream: fmt.Sprintf("multi-a-%d-%d", g, i), Expected: eventstore.NoStream(), Events: []eventstore.EventData{a}},
						eventstore.StreamAppend{Stream: fmt.Sprintf("multi-b-%d", i%5), Expected: eventstore.Any(), Events: []eventstore.EventData{b}},
					); err != nil {
						t.Error(err)
						return
					}
					record(a, b)
				}
			}
		}()
	}
	wg.Wait()
	got := receive(t, sub, len(committed))
	seen := map[uuid.UUID]bool{}
	for i, ev := range got {
		if i > 0 && !got[i-1].Position.Less(ev.Position) {
			t.Fatalf("event %d at %s delivered after %s", i, ev.Position, got[i-1].Position)
		}
		if seen[ev.ID] || !committed[ev.ID] {
			t.Fatalf("event %s delivered twice or never committed", ev.ID)
		}
		seen[ev.ID] = true
	}
	stored, err := st.ReadAll(ctx, eventstore.Start, 100_000, eventstore.Filter{})
	if err != nil || len(stored) != len(committed) {
		t.Fatalf("ReadAll: %d events, %v; want %d", len(stored), err, len(committed))
	}
}
