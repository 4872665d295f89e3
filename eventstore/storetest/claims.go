package storetest

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/eventstore"
)

// testClaims holds a ClaimStore to the claims' rules, and any other store to refusing them.
func (s *suite) testClaims(t *testing.T) {
	st := s.store(t)
	ctx := testContext(t)
	key, alice, bob := randomBytes(t), randomBytes(t), randomBytes(t)
	until := time.Now().Add(time.Minute)
	part := func(owner []byte, k []byte, until time.Time) (string, eventstore.StreamAppend) {
		name := stream("claim")
		return name, eventstore.StreamAppend{Stream: name, Expected: eventstore.NoStream(), Events: events("Claimed", 1),
			Claims: []eventstore.Claim{{Key: k, Owner: owner, Until: until}}}
	}
	if _, ok := st.(eventstore.ClaimStore); !ok {
		_, p := part(alice, key, until)
		if _, err := st.AppendMulti(ctx, p); !errors.Is(err, eventstore.ErrClaimsUnsupported) {
			t.Fatalf("append carrying a claim to a store that takes none: %v, want ErrClaimsUnsupported", err)
		}
		if n := streamLen(t, st, p.Stream); n != 0 {
			t.Errorf("%s holds %d events after a refused claim, want none", p.Stream, n)
		}
		return
	}
	_, first := part(alice, key, until)
	if _, err := st.AppendMulti(ctx, first); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	t.Run("OtherOwnerRefusedWithItsNeighbours", func(t *testing.T) {
		_, mine := part(bob, key, until)
		_, neighbour := part(bob, randomBytes(t), until)
		_, err := st.AppendMulti(ctx, neighbour, mine)
		checkClaimed(t, err, mine.Claims[0], neighbour.Claims[0])
		for _, p := range []eventstore.StreamAppend{mine, neighbour} {
			if n := streamLen(t, st, p.Stream); n != 0 {
				t.Errorf("%s holds %d events after the refused multi-append, want none", p.Stream, n)
			}
		}
	})
	t.Run("SameOwnerAgain", func(t *testing.T) {
		_, again := part(alice, key, until)
		if _, err := st.AppendMulti(ctx, again); err != nil {
			t.Fatalf("claim again under its owner: %v", err)
		}
	})
	t.Run("TwoOwnersInOneCall", func(t *testing.T) {
		k := randomBytes(t)
		_, a := part(alice, k, until)
		_, b := part(bob, k, until)
		_, err := st.AppendMulti(ctx, a, b)
		var ce *eventstore.ClaimedError
		if !errors.As(err, &ce) {
			t.Fatalf("two owners of one key in one call: %v, want a *ClaimedError", err)
		}
		if ce.Refuses(a.Claims[0]) == ce.Refuses(b.Claims[0]) {
			t.Errorf("the error refuses alice %v and bob %v; want exactly one", ce.Refuses(a.Claims[0]), ce.Refuses(b.Claims[0]))
		}
	})
	t.Run("LapsedTakenOver", func(t *testing.T) {
		k := randomBytes(t)
		_, old := part(alice, k, time.Now().Add(-time.Second))
		if _, err := st.AppendMulti(ctx, old); err != nil {
			t.Fatalf("lapsed claim: %v", err)
		}
		_, p := part(bob, k, until)
		if _, err := st.AppendMulti(ctx, p); err != nil {
			t.Fatalf("take over a lapsed claim: %v", err)
		}
	})
	t.Run("SlowPathRefusedToo", func(t *testing.T) {
		// A part whose expectation fails the fast path sends the call down the slow one.
		existing := stream("claim")
		mustAppend(t, st, existing, eventstore.NoStream(), events("Seeded", 1)...)
		_, mine := part(bob, key, until)
		moved := eventstore.StreamAppend{Stream: existing, Expected: eventstore.StreamExists(), Events: events("Moved", 1)}
		_, err := st.AppendMulti(ctx, moved, mine)
		checkClaimed(t, err, mine.Claims[0], eventstore.Claim{})
		if n := streamLen(t, st, existing); n != 1 {
			t.Errorf("%s holds %d events after the refused multi-append, want 1", existing, n)
		}
	})
}

// checkClaimed checks err is a *ClaimedError that refuses refused and not kept.
func checkClaimed(t *testing.T, err error, refused, kept eventstore.Claim) {
	t.Helper()
	var ce *eventstore.ClaimedError
	if !errors.As(err, &ce) || !errors.Is(err, eventstore.ErrClaimed) {
		t.Fatalf("claim held by another owner: %v, want a *ClaimedError", err)
	}
	if !ce.Refuses(refused) {
		t.Errorf("the error (key %x, holder %x) does not refuse the claim it failed on", ce.Key, ce.Holder)
	}
	if kept.Key != nil && ce.Refuses(kept) {
		t.Errorf("the error refuses a claim on a free key too")
	}
}

func randomBytes(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
