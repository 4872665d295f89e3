package commands

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/eventstore"
)

// ErrReplayed refuses a signed request whose signature another request has used.
var ErrReplayed = domain.ErrReplayed

// RequestClaim is a signed request's use-once claim on its signature. The SDK's middleware
// makes it instead of claiming the signature first, for a route whose command takes the claim
// in the commit that records the request (a submit run first, whose submit, outcome and charge
// share one commit): one round trip fewer on the request's path, and the request's effect and
// the proof that its signature was used commit together or not at all. Whatever path a request
// takes, the signature is taken before, or in, the first commit made for it (Settle), and is
// taken even when nothing is committed (the middleware settles it after the handler), so that
// a replay is refused whatever the first request's fate.
type RequestClaim struct {
	claim  eventstore.Claim
	settle func(ctx context.Context) (held bool, err error)

	mu      sync.Mutex
	decided bool
	err     error // ErrReplayed, or nil once the signature is taken
}

// NewRequestClaim returns the claim of key (the SHA-256 of the request's signature) by owner
// until it lapses, which settle takes on its own when no commit carries it (the replay guard,
// under owner): held reports that another owner holds it.
func NewRequestClaim(key, owner []byte, until time.Time, settle func(ctx context.Context) (held bool, err error)) *RequestClaim {
	return &RequestClaim{claim: eventstore.Claim{Key: key, Owner: owner, Until: until}, settle: settle}
}

// Settle takes the signature now unless it is taken already, and answers ErrReplayed when
// another request holds it. The answer is kept: later calls make no round trip. A store error
// is returned as it is and keeps nothing, so a later call tries again. Taking it again after
// a commit took it is harmless (the owner is the same).
func (c *RequestClaim) Settle(ctx context.Context) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	decided, known := c.decided, c.err
	c.mu.Unlock()
	if decided {
		return known
	}
	// Not under the lock: a charge batch reading the claim (carried) must not wait for this
	// round trip. Two settles at once both ask the guard, which answers both alike.
	held, err := c.settle(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.decided {
		c.decided = true
		if held {
			c.err = ErrReplayed
		}
	}
	return c.err
}

// lateSettleTimeout bounds SettleLate.
const lateSettleTimeout = 5 * time.Second

// SettleLate is Settle for a request that has failed or been answered: it goes on when the
// request's context ends, but gives up after lateSettleTimeout.
func (c *RequestClaim) SettleLate(ctx context.Context) error {
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateSettleTimeout)
	defer cancel()
	return c.Settle(ctx)
}

// Settled reports whether the claim's fate is known: taken, or refused as a replay.
func (c *RequestClaim) Settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decided
}

// carried is the claim for a commit to take, and false when there is none. It is carried
// whatever is known of it: taking a claim again under its owner is harmless, and a claim known
// (or, a moment later, found) to be a replay's is held by another owner, whose row refuses the
// commit. Leaving a replay's claim out instead let a batch that planned the item just before its
// caller learned of the replay (and answered 401) create and charge the call without its claim.
func (c *RequestClaim) carried() (eventstore.Claim, bool) {
	if c == nil {
		return eventstore.Claim{}, false
	}
	return c.claim, true
}

// replayed reports whether the claim is known to be a replay's.
func (c *RequestClaim) replayed() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decided && c.err != nil
}

// committed records that a commit took the claim.
func (c *RequestClaim) committed() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.decided {
		c.decided, c.err = true, nil
	}
}

// refusedBy reports whether ce refuses this claim, and records the refusal.
func (c *RequestClaim) refusedBy(ce *eventstore.ClaimedError) bool {
	if c == nil || !ce.Refuses(c.claim) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decided, c.err = true, ErrReplayed
	return true
}

// takesClaims reports whether the store takes claims in its commits (eventstore.ClaimStore).
func (h *core) takesClaims() bool {
	_, ok := h.store.(eventstore.ClaimStore)
	return ok
}
