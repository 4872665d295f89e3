package commands

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/eventstore"
)

// Taking turns on a hot stream. An instance decides a workspace's charges on the account state
// it has cached and appends at that revision. Alone, it is always right. With another instance
// charging the same workspace, both append continually, each moves the account under the
// other's in-flight batch, and about every other batch is refused, rolled back and decided
// again: with two instances a third of the batches were refused, and the rate of the two fell to
// about 0.6 of one. Once refused, an instance takes turns for contendedFor: it holds the
// account's lock (eventstore.StreamLocker) while it reads on, decides and appends, so the
// batches of the instances follow each other instead of colliding. Alone, an instance never
// takes the lock.
const (
	// contendedFor is how long after a refusal an instance takes turns on the stream.
	contendedFor = 10 * time.Second
	// turnWait bounds the wait for the lock; past it the batch goes ahead without, as before.
	turnWait = 2 * time.Second
)

// takeTurn waits for stream's lock when another process has recently appended to it under this
// one, and returns the function that releases it; nil when there is no turn to take (no
// recent contention, a store without locks, or no lock within turnWait).
func (h *Handler) takeTurn(ctx context.Context, stream string) func() {
	at, ok := h.contended.Load(stream)
	if !ok {
		return nil
	}
	if time.Since(at.(time.Time)) >= contendedFor {
		h.contended.CompareAndDelete(stream, at)
		return nil
	}
	locker, ok := h.store.(eventstore.StreamLocker)
	if !ok {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, turnWait)
	defer cancel()
	unlock, err := locker.LockStream(wctx, stream)
	if err != nil {
		return nil
	}
	return unlock
}
