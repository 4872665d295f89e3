package commands

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/decoded"
)

// charges is n recorded charges of one account, as the log holds them.
func charges(t *testing.T, n int) []eventstore.RecordedEvent {
	t.Helper()
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	recs := make([]eventstore.RecordedEvent, n)
	for i := range recs {
		data, err := json.Marshal(billing.CreditsCharged{WorkspaceID: "ws", Cause: fmt.Sprint("execution-", i),
			Amount: billing.Milli, FromUsage: billing.Milli, At: at})
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = eventstore.RecordedEvent{ID: uuid.New(), Stream: "billing-ws", Revision: uint64(i),
			Type: billing.CreditsCharged{}.EventType(), Data: data}
	}
	return recs
}

// An account's events that the log tail's consumers decoded already (the other instance's
// charges, read on by a turn or a balance check) are not decoded again by the fold.
func TestAnAccountsFoldTakesTheEventsTheProcessDecoded(t *testing.T) {
	recs := charges(t, 200)
	for _, rec := range recs {
		if _, err := decoded.Event(rec); err != nil {
			t.Fatal(err)
		}
	}
	var got loaded[billing.State]
	allocs := testing.AllocsPerRun(5, func() {
		var err error
		if got, _, err = fold(loaded[billing.State]{}, false, billingAgg, "billing-ws", recs); err != nil {
			t.Fatal(err)
		}
	})
	if got.state.Usage != -200*billing.Milli || got.state.Entries != 200 || got.revision != 199 {
		t.Fatalf("folded %+v at %d, want 200 charges of 1 credit", got.state, got.revision)
	}
	// Decoding one charge's JSON allocates several times; taking it from the process's
	// decoded events allocates nothing.
	if allocs >= float64(len(recs)) {
		t.Fatalf("folding %d decoded charges allocated %.0f times: the fold decoded them again", len(recs), allocs)
	}
}

// A state that keeps slices or maps of its events must not share them with the process's other
// consumers: only aggregates of values take the decoded events.
func TestOnlyAggregatesOfValuesShareDecodedEvents(t *testing.T) {
	if !billingAgg.sharesEvents || !cacheWindowAgg.sharesEvents {
		t.Fatal("the account and cache window folds decode their events anew")
	}
	if executionAgg.sharesEvents || runAgg.sharesEvents || moduleAgg.sharesEvents || workflowAgg.sharesEvents {
		t.Fatal("an aggregate whose state keeps an event's slices or maps shares decoded events")
	}
}
