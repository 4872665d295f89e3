package commands

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// A claim known to be a replay's is still carried into a commit: the first request's row
// refuses that commit. Leaving it out let a batch that planned the call just before its caller
// learned of the replay (and answered 401) create and charge the call without its claim.
func TestAKnownReplaysClaimIsStillCarried(t *testing.T) {
	key := []byte("signature hash")
	c := NewRequestClaim(key, []byte("the replay"), time.Now().Add(time.Minute),
		func(context.Context) (bool, error) { return true, nil })
	if err := c.Settle(context.Background()); !errors.Is(err, ErrReplayed) {
		t.Fatalf("settle: %v, want ErrReplayed", err)
	}
	if !c.replayed() {
		t.Fatal("the settled claim is not known as a replay's")
	}
	carried, ok := c.carried()
	if !ok || !bytes.Equal(carried.Key, key) {
		t.Fatalf("carried %+v, %v; want the claim on %q", carried, ok, key)
	}
}
