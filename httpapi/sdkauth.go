package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/singleflight"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/internal/apikeys"
)

// Headers of a signed SDK request (SPEC.md 5; decisions in docs/authentication.md).
const (
	HeaderAPIKey       = "X-Api-Key"
	HeaderSDKTimestamp = "X-Sdk-Timestamp"
	HeaderSDKSignature = "X-Sdk-Signature"
)

// The only three things a failed authentication says (SPEC.md 5): which part of a credential
// was wrong beyond these would help an attacker more than a caller.
const (
	MsgInvalidAPIKey    = "invalid API key"
	MsgInvalidSignature = "invalid signature"
	MsgExpiredTimestamp = "expired timestamp"
)

// Defaults of SDKAuthConfig.
const (
	DefaultSDKSkew     = 300 * time.Second
	DefaultSDKCacheTTL = 5 * time.Second
	MaxSDKCacheTTL     = 5 * time.Second
	DefaultSDKRate     = 50
	DefaultSDKBurst    = 100
	// DefaultMaxStreamsPerKey is SDKAuthConfig.MaxStreamsPerKey's default.
	DefaultMaxStreamsPerKey = 100
	// DefaultUnknownKeyRate and DefaultUnknownKeyBurst bound the store reads for unknown keys
	// per client address: a client that mistyped its key retries well within them.
	DefaultUnknownKeyRate  = 1
	DefaultUnknownKeyBurst = 20
	// knownKeyTTL is how long a key found in the store is exempt from its address's throttle
	// of unknown keys (it is still read again after CacheTTL).
	knownKeyTTL         = 10 * time.Minute
	lookupTimeout       = 10 * time.Second
	maxCachedKeys       = 50_000
	maxLimitedKeys      = 100_000
	limiterSweepEvery   = time.Minute
	memoryGuardMinSweep = 4096
	// replayMargin keeps a signature remembered a little past its skew window, so instances
	// whose clocks differ by less than this never forget it while another could still accept it.
	replayMargin = time.Minute
)

// Caller is the authenticated API key of an SDK request.
type Caller struct {
	KeyID, WorkspaceID string
	// AllowedWorkflowIDs is empty (never nil) for an unrestricted key (SPEC.md 5 rule 2).
	AllowedWorkflowIDs []string
}

// AllowsWorkflow reports whether the key may act on the workflow: an empty list allows all.
func (c Caller) AllowsWorkflow(workflowID string) bool {
	if len(c.AllowedWorkflowIDs) == 0 {
		return true
	}
	for _, id := range c.AllowedWorkflowIDs {
		if id == workflowID {
			return true
		}
	}
	return false
}

type callerKey struct{}

// CallerFrom returns the caller that SDKAuth authenticated for this request.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

type requestClaimKey struct{}

// requestClaimFrom is the signature claim SDKAuth left for the route's command to take
// (ClaimInCommit), nil when it took the signature itself; the handler passes it to the
// command (commands.SubmitExecution.Claim).
func requestClaimFrom(ctx context.Context) *commands.RequestClaim {
	c, _ := ctx.Value(requestClaimKey{}).(*commands.RequestClaim)
	return c
}

// WithCaller attaches an authenticated caller to ctx.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// SDKAuthConfig configures SDKAuth. Zero values take the defaults noted.
type SDKAuthConfig struct {
	// Lookup finds keys; required.
	Lookup KeyLookup
	// Replay remembers accepted signatures. Nil: an in-memory guard on the Now clock, which only
	// sees this process's requests; several serve processes need a shared guard (internal/replay).
	Replay ReplayGuard
	// ClaimsInCommits lets ClaimInCommit routes leave their signature to the commit that records
	// the request; it needs an OwnedReplayGuard whose claims the event store's commits share
	// (the Postgres event store with internal/replay on its database). False: every route claims
	// its signature before its handler runs.
	ClaimsInCommits bool
	// Now is the clock (time.Now).
	Now func() time.Time
	// Skew is how far X-Sdk-Timestamp may be from Now either way (300 s).
	Skew time.Duration
	// CacheTTL is how long a key lookup is reused (5 s, also the maximum): revocation and expiry
	// take effect within it.
	CacheTTL time.Duration
	// RatePerSecond is the sustained rate per API key, in cost tokens (50); Burst is the bucket
	// size (100). The buckets are per process: N instances allow N times the rate.
	RatePerSecond float64
	Burst         int
	// MaxStreamsPerKey is how many SSE streams (Stream routes) one key may hold open at once,
	// execution and run streams together (DefaultMaxStreamsPerKey); past it a stream is
	// answered 429. Per process, like the rate limit.
	MaxStreamsPerKey int
	// ExecutionOwner tells whose an execution is, for the ForExecution routes of scoped keys
	// (ExecutionOwnerFrom). Nil: scoped keys read no execution.
	ExecutionOwner func(ctx context.Context, executionID string) (ExecutionOwner, error)
	// UnknownKeyRate and UnknownKeyBurst bound, per client address, the store reads for keys
	// the store does not hold (DefaultUnknownKeyRate per second, DefaultUnknownKeyBurst).
	UnknownKeyRate  float64
	UnknownKeyBurst int
	// Logger receives internal failures (lookups, the replay guard).
	Logger logrus.FieldLogger
}

// SDKAuth authenticates and rate-limits SDK requests (SPEC.md 5, 7, 8).
type SDKAuth struct {
	opts SDKAuthConfig
	// local remembers the signatures of ClaimInCommit routes seen by this process, so that a
	// replay sent here is refused before it spends its key's tokens or runs anything.
	local   *memoryReplayGuard
	cache   *keyCache
	flight  singleflight.Group
	limiter *limiter
	streams *streamSlots
	// unknown throttles, per client address, the lookups of keys not known to exist; known
	// remembers the ids of keys found lately, which skip that throttle.
	unknown *limiter
	known   *keyCache
}

// setDefaults fills zero values and repairs out-of-range ones (negative, NaN, a CacheTTL above
// MaxSDKCacheTTL) with the default, so that NewSDKAuth always gets a valid config.
func (c *SDKAuthConfig) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Skew <= 0 {
		c.Skew = DefaultSDKSkew
	}
	if c.CacheTTL <= 0 || c.CacheTTL > MaxSDKCacheTTL {
		c.CacheTTL = DefaultSDKCacheTTL
	}
	if !positiveRate(c.RatePerSecond) {
		c.RatePerSecond = DefaultSDKRate
	}
	if c.Burst <= 0 {
		c.Burst = DefaultSDKBurst
	}
	if c.Replay == nil {
		c.Replay = newMemoryReplayGuard(c.Now)
	}
	if c.MaxStreamsPerKey <= 0 {
		c.MaxStreamsPerKey = DefaultMaxStreamsPerKey
	}
	if !positiveRate(c.UnknownKeyRate) {
		c.UnknownKeyRate = DefaultUnknownKeyRate
	}
	if c.UnknownKeyBurst <= 0 {
		c.UnknownKeyBurst = DefaultUnknownKeyBurst
	}
	c.Logger = logger(c.Logger)
}

func positiveRate(r float64) bool { return r > 0 && !math.IsNaN(r) && !math.IsInf(r, 0) }

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default; Lookup is required.
func (c SDKAuthConfig) Validate() error {
	switch {
	case c.Lookup == nil:
		return errors.New("httpapi: SDKAuthConfig.Lookup is required")
	case c.Skew < 0:
		return fmt.Errorf("httpapi: Skew %v: must not be negative", c.Skew)
	case c.CacheTTL < 0 || c.CacheTTL > MaxSDKCacheTTL:
		return fmt.Errorf("httpapi: CacheTTL %v: must be between 0 and %v", c.CacheTTL, MaxSDKCacheTTL)
	case c.RatePerSecond != 0 && !positiveRate(c.RatePerSecond):
		return fmt.Errorf("httpapi: RatePerSecond %v: must be a positive number", c.RatePerSecond)
	case c.Burst < 0:
		return fmt.Errorf("httpapi: Burst %d: must not be negative", c.Burst)
	case c.MaxStreamsPerKey < 0:
		return fmt.Errorf("httpapi: MaxStreamsPerKey %d: must not be negative", c.MaxStreamsPerKey)
	case c.UnknownKeyRate != 0 && !positiveRate(c.UnknownKeyRate):
		return fmt.Errorf("httpapi: UnknownKeyRate %v: must be a positive number", c.UnknownKeyRate)
	case c.UnknownKeyBurst < 0:
		return fmt.Errorf("httpapi: UnknownKeyBurst %d: must not be negative", c.UnknownKeyBurst)
	}
	return nil
}

// NewSDKAuth returns the middleware. It calls opts.setDefaults, which repairs every field but
// Lookup; without a Lookup, a wiring mistake, it panics with Validate's error.
func NewSDKAuth(opts SDKAuthConfig) *SDKAuth {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	return &SDKAuth{
		opts:    opts,
		local:   newMemoryReplayGuard(opts.Now),
		cache:   &keyCache{ttl: opts.CacheTTL, max: maxCachedKeys, entries: map[string]cachedKey{}},
		limiter: newLimiter(opts.RatePerSecond, opts.Burst, maxLimitedKeys),
		streams: &streamSlots{max: opts.MaxStreamsPerKey, open: map[string]int{}},
		unknown: newLimiter(opts.UnknownKeyRate, opts.UnknownKeyBurst, maxLimitedKeys),
		known:   &keyCache{ttl: knownKeyTTL, max: maxCachedKeys, entries: map[string]cachedKey{}},
	}
}

// RouteOption declares what a route is, for the checks SDKAuth makes after authentication:
// who may call it (ForExecution, UnscopedOnly) and whether it is a stream (Stream).
type RouteOption func(*routeSpec)

type routeSpec struct {
	access        keyAccess
	stream        bool
	claimInCommit bool
}

// ClaimInCommit marks a route whose command takes the request's signature in the commit that
// records it, or before its first commit (commands.RequestClaim): the middleware then makes no
// round trip of its own for it (SDKAuthConfig.ClaimsInCommits).
func ClaimInCommit(s *routeSpec) { s.claimInCommit = true }

// Stream marks an SSE route: while it is open it holds one of its key's stream slots
// (SDKAuthConfig.MaxStreamsPerKey).
func Stream(s *routeSpec) { s.stream = true }

// Route authenticates, rate-limits with cost tokens (submit component costs 2, others 1), sets
// the RateLimit-* headers, applies the route's options (what a scoped key may do, the stream
// cap) and puts the Caller in the request context.
func (a *SDKAuth) Route(cost int, h http.Handler, opts ...RouteOption) http.Handler {
	if cost < 1 {
		cost = 1
	}
	var spec routeSpec
	for _, o := range opts {
		o(&spec)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := a.opts.Now()
		key, ok := a.authenticateKey(w, r, now)
		if !ok {
			return
		}
		tsText := r.Header.Get(HeaderSDKTimestamp)
		ts, ok := parseTimestamp(tsText)
		if !ok || now.Sub(ts) > a.opts.Skew || ts.Sub(now) > a.opts.Skew {
			WriteError(w, http.StatusUnauthorized, MsgExpiredTimestamp)
			return
		}
		sig, ok := decodeSignature(r.Header.Get(HeaderSDKSignature))
		if !ok {
			WriteError(w, http.StatusUnauthorized, MsgInvalidSignature)
			return
		}
		body, err := readBody(r)
		if err != nil {
			if IsBodyTooLarge(err) {
				WriteError(w, http.StatusRequestEntityTooLarge, "request body exceeds the limit")
				return
			}
			WriteError(w, http.StatusBadRequest, "could not read the request body")
			return
		}
		// The handler reads the same bytes that were verified.
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !key.verify(apikeys.Message(r.Method, requestTarget(r), tsText, body), sig) {
			WriteError(w, http.StatusUnauthorized, MsgInvalidSignature)
			return
		}
		claim, ok := a.claimLater(w, r, sig, ts, spec)
		if !ok || (claim == nil && !a.fresh(w, r, sig, ts)) {
			return
		}
		if !a.limit(w, key.ID, cost, now, func() { a.settle(r, claim) }) {
			return
		}
		caller := Caller{KeyID: key.ID, WorkspaceID: key.WorkspaceID, AllowedWorkflowIDs: append([]string{}, key.AllowedWorkflowIDs...)}
		ctx := WithCaller(r.Context(), caller)
		if claim != nil {
			ctx = context.WithValue(ctx, requestClaimKey{}, claim)
		}
		ctx = WithLogger(ctx, LoggerFrom(ctx).WithFields(logrus.Fields{"workspaceId": key.WorkspaceID, "apiKeyId": key.ID}))
		r = r.WithContext(ctx)
		if !a.permitted(w, r, caller, spec.access) {
			a.settle(r, claim) // a refused request's signature is used too
			return
		}
		if spec.stream {
			a.serveStream(w, r, key.ID, h)
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		replayed := a.settle(r, claim)
		if rec.status == http.StatusServiceUnavailable || replayed {
			// Nothing was done: an outage must not leave the clients that retry through it
			// short of tokens, refused 429 once the service is back; nor may replays of a
			// captured request, sent to other instances, drain its key's tokens.
			a.limiter.give(key.ID, cost, now)
		}
	})
}

func (a *SDKAuth) log(r *http.Request) logrus.FieldLogger {
	if l, ok := r.Context().Value(loggerKey{}).(logrus.FieldLogger); ok {
		return l
	}
	return a.opts.Logger
}
