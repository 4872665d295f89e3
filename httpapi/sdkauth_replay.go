package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/switchyard/switchyard/commands"
)

// Replays of signed SDK requests: the guard that remembers accepted signatures, and the claim a
// ClaimInCommit route leaves for its command to take in the commit that records the request.

// ReplayGuard remembers accepted signatures until they leave the skew window; Seen reports true
// when sig was already accepted (and records it otherwise), atomically.
type ReplayGuard interface {
	Seen(ctx context.Context, signature []byte, until time.Time) (bool, error)
}

// OwnedReplayGuard is a ReplayGuard that also takes a signature under an owner, who may take it
// again, and keeps it where the event store's commits take claims too (internal/replay on the
// Postgres event store). With one, a ClaimInCommit route leaves the signature for its command
// to take in the commit that records the request (commands.RequestClaim).
type OwnedReplayGuard interface {
	ReplayGuard
	// Take is Seen under owner: true when another owner holds the signature.
	Take(ctx context.Context, signature, owner []byte, until time.Time) (bool, error)
}

// fresh refuses a state-changing request whose signature was accepted before. It runs after
// the signature check, so only a genuine request can occupy a slot, and before the rate limit,
// so replays of a captured request cannot drain its key's tokens. GET and HEAD change nothing:
// replaying one shows the captor only what the captured answer showed, while refusing them
// would break polling, which sends the same signed GET several times a second (Ed25519 is
// deterministic: the same request in the same second has the same signature).
func (a *SDKAuth) fresh(w http.ResponseWriter, r *http.Request, sig []byte, ts time.Time) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	seen, err := a.opts.Replay.Seen(r.Context(), sig, ts.Add(a.opts.Skew+replayMargin))
	if err != nil {
		WriteDomainError(w, r, fmt.Errorf("sdk auth: replay guard: %w", err))
		return false
	}
	if seen {
		WriteError(w, http.StatusUnauthorized, MsgInvalidSignature)
		return false
	}
	return true
}

// claimLater makes the request's signature claim for its command to take (commands.RequestClaim)
// on a ClaimInCommit route, when the guard and the store allow it; nil otherwise, for fresh to
// claim it now. A replay this process has seen is refused here, before it spends tokens.
func (a *SDKAuth) claimLater(w http.ResponseWriter, r *http.Request, sig []byte, ts time.Time, spec routeSpec) (*commands.RequestClaim, bool) {
	g, owned := a.opts.Replay.(OwnedReplayGuard)
	if !spec.claimInCommit || !owned || !a.opts.ClaimsInCommits || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil, true
	}
	until := ts.Add(a.opts.Skew + replayMargin)
	if seen, _ := a.local.Seen(r.Context(), sig, until); seen {
		WriteError(w, http.StatusUnauthorized, MsgInvalidSignature)
		return nil, false
	}
	owner := make([]byte, 16)
	if _, err := rand.Read(owner); err != nil {
		WriteDomainError(w, r, fmt.Errorf("sdk auth: claim owner: %w", err))
		return nil, false
	}
	key := sha256.Sum256(sig)
	return commands.NewRequestClaim(key[:], owner, until,
		func(ctx context.Context) (bool, error) { return g.Take(ctx, sig, owner, until) }), true
}

// settle takes the request's claim if its handler did not, so that the signature is used
// whatever the request's fate, and reports whether the request was a replay.
func (a *SDKAuth) settle(r *http.Request, claim *commands.RequestClaim) bool {
	if claim == nil {
		return false
	}
	err := claim.SettleLate(r.Context())
	if err != nil && !errors.Is(err, commands.ErrReplayed) {
		a.log(r).WithError(err).Warn("sdk auth: replay guard: settle the claim of a request already answered")
	}
	return errors.Is(err, commands.ErrReplayed)
}

// memoryReplayGuard remembers signatures in this process.
type memoryReplayGuard struct {
	mu        sync.Mutex
	now       func() time.Time
	seen      map[[sha256.Size]byte]time.Time
	nextSweep int
}

// NewMemoryReplayGuard returns a ReplayGuard for a single process, on the wall clock.
func NewMemoryReplayGuard() ReplayGuard { return newMemoryReplayGuard(time.Now) }

func newMemoryReplayGuard(now func() time.Time) *memoryReplayGuard {
	return &memoryReplayGuard{now: now, seen: map[[sha256.Size]byte]time.Time{}, nextSweep: memoryGuardMinSweep}
}

// Seen implements ReplayGuard. Expired entries are swept whenever the map has doubled since the
// last sweep, which keeps memory proportional to the signatures of one window at O(1) amortised.
func (g *memoryReplayGuard) Seen(_ context.Context, sig []byte, until time.Time) (bool, error) {
	k := sha256.Sum256(sig)
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if exp, ok := g.seen[k]; ok && !exp.Before(now) {
		return true, nil
	}
	g.seen[k] = until
	if len(g.seen) >= g.nextSweep {
		for s, exp := range g.seen {
			if exp.Before(now) {
				delete(g.seen, s)
			}
		}
		g.nextSweep = max(2*len(g.seen), memoryGuardMinSweep)
	}
	return false, nil
}
