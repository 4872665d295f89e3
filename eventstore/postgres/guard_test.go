package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
)

// charged is an event of the type the guards below bound, with amount in its "amount" field.
func charged(amount string) eventstore.EventData {
	return eventstore.EventData{ID: uuid.New(), Type: "Charged", Data: []byte(`{"amount": ` + amount + `}`)}
}

// chargeGuard allows others' Charged and Bought events after from, their amounts up to max.
func chargeGuard(from uint64, max string) eventstore.Guard {
	return eventstore.Guard{Stream: "account-a", From: from, Types: []string{"Charged", "Bought"}, MaxEvents: 3,
		SumType: "Charged", SumField: "amount", SumMax: max}
}

// A guarded append writes at whatever revision the stream has when what others appended since
// the guard's revision is within the guard, and returns those events; past the guard (a sum
// too large, an event of another type, too many events) it writes nothing, its other parts
// neither, and says ErrGuardRefused.
func TestAppendGuarded(t *testing.T) {
	pool, _ := newMigratedDB(t, 8)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	if _, err := st.Append(ctx, "account-a", eventstore.NoStream(), event("Opened")); err != nil {
		t.Fatal(err)
	}
	guarded := func(g eventstore.Guard, amount string) ([]eventstore.AppendResult, []eventstore.RecordedEvent, error) {
		return st.AppendGuarded(ctx, g,
			eventstore.StreamAppend{Stream: "account-a", Expected: eventstore.Any(), Events: []eventstore.EventData{charged(amount)}},
			eventstore.StreamAppend{Stream: "item-" + uuid.NewString(), Expected: eventstore.NoStream(), Events: []eventstore.EventData{event("Done")}})
	}
	revision := func() uint64 {
		evs, err := st.ReadStream(ctx, "account-a", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return evs[len(evs)-1].Revision
	}

	// Nothing new since revision 1: written after the stream's last event.
	res, seen, err := guarded(chargeGuard(1, "0"), "1")
	if err != nil || len(seen) != 0 || res[0].NextRevision != 1 {
		t.Fatalf("guarded append on an unmoved stream: %+v, saw %d, %v; want revision 1, nothing seen", res, len(seen), err)
	}
	// Others charged 2.5 and bought since revision 2: within 2.5, and seen in order.
	for _, e := range []eventstore.EventData{charged("2"), event("Bought"), charged("0.5")} {
		if _, err := st.Append(ctx, "account-a", eventstore.Any(), e); err != nil {
			t.Fatal(err)
		}
	}
	res, seen, err = guarded(chargeGuard(2, "2.5"), "1")
	if err != nil || res[0].NextRevision != 5 || len(seen) != 3 || seen[0].Revision != 2 || seen[2].Revision != 4 {
		t.Fatalf("guarded append within its guard: %+v, saw %+v, %v; want revision 5 after the others' 3", res, seen, err)
	}

	// Past the guard: nothing written, in either part.
	if _, err := st.Append(ctx, "account-a", eventstore.Any(), charged("3")); err != nil {
		t.Fatal(err)
	}
	before, items := revision(), countEvents(t, st, "Done")
	for name, g := range map[string]eventstore.Guard{
		"sum":    chargeGuard(6, "2.999"),
		"types":  {Stream: "account-a", From: 2, Types: []string{"Charged"}, MaxEvents: 10, SumType: "Charged", SumField: "amount", SumMax: "100"},
		"events": {Stream: "account-a", From: 2, Types: []string{"Charged", "Bought"}, MaxEvents: 3, SumType: "Charged", SumField: "amount", SumMax: "100"},
	} {
		if _, _, err := guarded(g, "1"); !errors.Is(err, eventstore.ErrGuardRefused) {
			t.Fatalf("%s past the guard: %v, want ErrGuardRefused", name, err)
		}
	}
	if revision() != before || countEvents(t, st, "Done") != items {
		t.Fatal("a refused guarded append wrote events")
	}
	// The guard's stream must be appended to at any revision.
	if _, _, err := st.AppendGuarded(ctx, chargeGuard(7, "1"), eventstore.StreamAppend{Stream: "account-a", Expected: eventstore.Exact(6), Events: []eventstore.EventData{charged("1")}}); err == nil {
		t.Fatal("a guarded append with an exact expectation on its stream was accepted")
	}
}

// Guarded appends of many writers at once to one stream each write once, in turn: none lost,
// none doubled, each seeing exactly the events written since its guard's revision.
func TestAppendGuardedConcurrently(t *testing.T) {
	pool, _ := newMigratedDB(t, 16)
	st := newStore(t, pool, Config{})
	ctx := testCtx(t)
	if _, err := st.Append(ctx, "account-a", eventstore.NoStream(), event("Opened")); err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := uint64(1) // each writer knows the stream up to its own last append
			for i := range each {
				g := eventstore.Guard{Stream: "account-a", From: from, Types: []string{"Charged"}, MaxEvents: 1000,
					SumType: "Charged", SumField: "amount", SumMax: "100000"}
				res, seen, err := st.AppendGuarded(ctx, g, eventstore.StreamAppend{Stream: "account-a", Expected: eventstore.Any(),
					Events: []eventstore.EventData{charged(fmt.Sprint(w*100 + i))}})
				if err != nil {
					t.Error(err)
					return
				}
				if uint64(len(seen)) != res[0].NextRevision-from {
					t.Errorf("writer %d saw %d events from %d, but wrote at %d", w, len(seen), from, res[0].NextRevision)
				}
				from = res[0].NextRevision + 1
			}
		}()
	}
	wg.Wait()
	evs, err := st.ReadStream(ctx, "account-a", 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	amounts := map[string]int{}
	for _, e := range evs {
		amounts[string(e.Data)]++
	}
	if len(evs) != writers*each || len(amounts) != writers*each {
		t.Fatalf("%d events, %d distinct, want %d of each", len(evs), len(amounts), writers*each)
	}
}

// countEvents counts the log's events of type typ.
func countEvents(t *testing.T, st *Store, typ string) int {
	t.Helper()
	var n int
	if err := st.pool.QueryRow(testCtx(t), `SELECT count(*) FROM events WHERE type = $1`, typ).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
