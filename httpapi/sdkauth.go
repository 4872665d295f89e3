package httpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/singleflight"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/apikey"
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

// KeyLookup finds a key by id (the id parsed out of the apiKey); domain.ErrNotFound when unknown.
type KeyLookup func(ctx context.Context, keyID string) (SDKKey, error)

// SDKKey is what authenticating a request needs to know about a key.
type SDKKey struct {
	ID, WorkspaceID    string
	KeyHash            string // hex SHA-256 of the full apiKey
	PublicKey          ed25519.PublicKey
	AllowedWorkflowIDs []string
	ExpiresAt          *time.Time
	Revoked            bool
}

// LookupFromStore adapts a fold of the key's stream, such as commands.Workspaces.APIKey, to a
// KeyLookup: reading the event store rather than a read model means a key works the instant
// its creation is acknowledged.
func LookupFromStore(fold func(ctx context.Context, id string) (apikey.State, error)) KeyLookup {
	return func(ctx context.Context, id string) (SDKKey, error) {
		s, err := fold(ctx, id)
		if err != nil {
			return SDKKey{}, err
		}
		if !s.Exists {
			return SDKKey{}, fmt.Errorf("api key %s: %w", id, domain.ErrNotFound)
		}
		pub, err := apikeys.ParsePublicKey(s.PublicKey)
		if err != nil {
			return SDKKey{}, fmt.Errorf("api key %s: %w", id, err)
		}
		allowed := append([]string{}, s.AllowedWorkflowIDs...)
		return SDKKey{ID: s.ID, WorkspaceID: s.WorkspaceID, KeyHash: s.KeyHash, PublicKey: pub,
			AllowedWorkflowIDs: allowed, ExpiresAt: s.ExpiresAt, Revoked: s.Revoked}, nil
	}
}

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
		if !ed25519.Verify(key.PublicKey, apikeys.Message(r.Method, requestTarget(r), tsText, body), sig) {
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

// Limit spends cost tokens of key's bucket in the limiter of the SDK endpoints and sets the
// RateLimit-* headers; when the bucket is short it answers 429 with Retry-After and reports
// false. Other credentials (MCP tokens) share the limiter, and so its configuration, under
// keys of their own.
func (a *SDKAuth) Limit(w http.ResponseWriter, key string, cost int) bool {
	return a.limit(w, key, max(cost, 1), a.opts.Now(), nil)
}

// limit is Limit at now; refused, when set, runs before a refusal is answered (a request
// refused 429 has used its signature all the same: a replay of it must not pass later).
func (a *SDKAuth) limit(w http.ResponseWriter, key string, cost int, now time.Time, refused func()) bool {
	d := a.limiter.take(key, cost, now)
	if !d.allowed && refused != nil {
		refused()
	}
	hdr := w.Header()
	hdr.Set("RateLimit-Limit", strconv.Itoa(d.limit))
	hdr.Set("RateLimit-Remaining", strconv.Itoa(d.remaining))
	hdr.Set("RateLimit-Reset", strconv.Itoa(d.reset))
	if !d.allowed {
		hdr.Set("Retry-After", strconv.Itoa(d.retryAfter))
		WriteError(w, http.StatusTooManyRequests, "rate limit exceeded")
		return false
	}
	return true
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

// authenticateKey finds the X-Api-Key's key and checks it is genuine and usable at now; on
// failure it has answered the request.
func (a *SDKAuth) authenticateKey(w http.ResponseWriter, r *http.Request, now time.Time) (SDKKey, bool) {
	raw := r.Header.Get(HeaderAPIKey)
	id, err := apikeys.ParseID(raw)
	if err != nil {
		WriteError(w, http.StatusUnauthorized, MsgInvalidAPIKey)
		return SDKKey{}, false
	}
	key, found, err := a.key(r.Context(), id, now, clientAddress(r))
	var throttled *unknownKeysThrottled
	if errors.As(err, &throttled) {
		w.Header().Set("Retry-After", strconv.Itoa(throttled.retryAfter))
		WriteError(w, http.StatusTooManyRequests, "too many unknown API keys from this address")
		return SDKKey{}, false
	}
	if err != nil {
		WriteDomainError(w, r, fmt.Errorf("sdk auth: key lookup: %w", err))
		return SDKKey{}, false
	}
	// The hash comparison runs whether or not the key was found, in constant time, so timing
	// tells nothing about which keys exist or how much of a hash matched.
	hashOK := subtle.ConstantTimeCompare([]byte(apikeys.Hash(raw)), []byte(key.KeyHash)) == 1
	if !found || !hashOK || key.Revoked || (key.ExpiresAt != nil && !now.Before(*key.ExpiresAt)) {
		WriteError(w, http.StatusUnauthorized, MsgInvalidAPIKey)
		return SDKKey{}, false
	}
	if len(key.PublicKey) != ed25519.PublicKeySize {
		// ed25519.Verify panics on such a key: a stored key this broken is a server fault.
		a.log(r).WithField("apiKeyId", id).Error("sdk auth: stored public key has the wrong size")
		WriteError(w, http.StatusInternalServerError, "internal error")
		return SDKKey{}, false
	}
	return key, true
}

// unknownKeysThrottled is key's refusal to read the store for a client address that has
// tried too many unknown keys.
type unknownKeysThrottled struct{ retryAfter int }

func (e *unknownKeysThrottled) Error() string { return "too many unknown API keys from this address" }

// key returns the key with id from the cache or the lookup; found is false for an unknown key.
// Concurrent misses for one id share a single lookup. A key not found lately is looked up only
// while addr's bucket of unknown keys holds a token, and costs one only when the store does not
// know it: random keys cost their sender the store reads of the burst only, while real keys
// cost nothing (many real keys behind one address, first seen at once, are not throttled) and
// pass even when their address is throttled, provided this process has seen them in
// knownKeyTTL.
func (a *SDKAuth) key(ctx context.Context, id string, now time.Time, addr string) (SDKKey, bool, error) {
	if c, ok := a.cache.get(id, now); ok {
		return c.key, c.found, nil
	}
	_, known := a.known.get(id, now)
	if !known {
		if d := a.unknown.check(addr, 1, now); !d.allowed {
			return SDKKey{}, false, &unknownKeysThrottled{retryAfter: d.retryAfter}
		}
	}
	v, err, _ := a.flight.Do(id, func() (any, error) {
		// Detached from the first caller's cancellation, which would fail the others sharing it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		k, err := a.opts.Lookup(lctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			c := cachedKey{found: false, fetched: now}
			a.cache.put(id, c)
			return c, nil
		}
		if err != nil {
			return nil, err
		}
		c := cachedKey{key: k, found: true, fetched: now}
		a.cache.put(id, c)
		a.known.put(id, cachedKey{found: true, fetched: now})
		return c, nil
	})
	if err != nil {
		return SDKKey{}, false, err
	}
	c := v.(cachedKey)
	if !c.found && !known {
		a.unknown.take(addr, 1, now)
	}
	return c.key, c.found, nil
}

// ThrottleUnknown puts another credential's store read under the throttle of unknown API keys
// (the MCP endpoint's tokens): unless credential id (named apart from API key ids, e.g.
// "mcp:"+id) was found lately, the read goes ahead only while the bucket of r's address holds
// a token; when it is empty it answers 429 with Retry-After and refusal, and ok is false. The
// caller then calls settle with whether the credential exists: an unknown one spends a token,
// a found one skips the throttle from then on, so random credentials cost their sender the
// burst's reads only and real ones nothing.
func (a *SDKAuth) ThrottleUnknown(w http.ResponseWriter, r *http.Request, id, refusal string) (settle func(found bool), ok bool) {
	now := a.opts.Now()
	if _, known := a.known.get(id, now); known {
		return func(bool) {}, true
	}
	addr := clientAddress(r)
	if d := a.unknown.check(addr, 1, now); !d.allowed {
		w.Header().Set("Retry-After", strconv.Itoa(d.retryAfter))
		WriteError(w, http.StatusTooManyRequests, refusal)
		return nil, false
	}
	return func(found bool) {
		now := a.opts.Now()
		if !found {
			a.unknown.take(addr, 1, now)
			return
		}
		a.known.put(id, cachedKey{found: true, fetched: now})
	}, true
}

// clientAddress is what the throttle of unknown keys counts by: the peer's IP, and for IPv6
// its /64, which one client usually holds whole. Forwarded-for headers are not trusted: behind
// a proxy every client shares the proxy's address, which only unknown keys can exhaust.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if ip.Is4() || ip.Is4In6() {
		return ip.Unmap().String()
	}
	return netip.PrefixFrom(ip, 64).Masked().String()
}

func (a *SDKAuth) log(r *http.Request) logrus.FieldLogger {
	if l, ok := r.Context().Value(loggerKey{}).(logrus.FieldLogger); ok {
		return l
	}
	return a.opts.Logger
}

// requestTarget is the path and query string exactly as the client sent them.
func requestTarget(r *http.Request) string {
	if r.RequestURI != "" {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// parseTimestamp reads Unix seconds written as plain decimal digits.
func parseTimestamp(s string) (time.Time, bool) {
	if s == "" || len(s) > 12 {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// decodeSignature reads base64 (standard alphabet; padding optional) of a 64-byte signature.
func decodeSignature(s string) ([]byte, bool) {
	if s == "" || len(s) > 100 {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil || len(b) != ed25519.SignatureSize {
		return nil, false
	}
	return b, true
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	defer r.Body.Close()
	return io.ReadAll(r.Body)
}

// keyCache remembers lookups, found or not, for a TTL measured on the injected clock.
type keyCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	entries map[string]cachedKey
}

type cachedKey struct {
	key     SDKKey
	found   bool
	fetched time.Time
}

func (c *keyCache) get(id string, now time.Time) (cachedKey, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		return cachedKey{}, false
	}
	// A clock that went backwards counts as stale too, never as fresh for longer.
	if age := now.Sub(e.fetched); age < 0 || age >= c.ttl {
		delete(c.entries, id)
		return cachedKey{}, false
	}
	return e, true
}

func (c *keyCache) put(id string, e cachedKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[id]; !ok && len(c.entries) >= c.max {
		for k, v := range c.entries {
			if e.fetched.Sub(v.fetched) >= c.ttl {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[id] = e
}

// limiter is a token bucket per API key. It lives in this process only, so N instances behind a
// load balancer allow N times the configured rate.
type limiter struct {
	mu        sync.Mutex
	rate      float64
	burst     float64
	max       int
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// decision is the outcome of take: the RateLimit-* header values, and Retry-After when refused.
type decision struct {
	allowed                 bool
	limit, remaining, reset int
	retryAfter              int
}

func newLimiter(rate float64, burst, max int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), max: max, buckets: map[string]*bucket{}}
}

// eps absorbs float rounding so a bucket refilled to exactly n tokens counts as n.
const eps = 1e-9

// take spends cost tokens of key's bucket if it holds them. A cost above the burst is charged
// as the whole bucket, or the request could never pass.
func (l *limiter) take(key string, cost int, now time.Time) decision {
	return l.decide(key, cost, now, true)
}

// check is take without spending: whether key's bucket holds cost tokens now.
func (l *limiter) check(key string, cost int, now time.Time) decision {
	return l.decide(key, cost, now, false)
}

func (l *limiter) decide(key string, cost int, now time.Time, spend bool) decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	c := math.Min(float64(cost), l.burst)
	d := decision{limit: int(l.burst)}
	if b.tokens+eps >= c {
		if spend {
			b.tokens = math.Max(0, b.tokens-c)
		}
		d.allowed = true
	} else {
		d.retryAfter = max(1, int(math.Ceil((c-b.tokens)/l.rate-eps)))
	}
	d.remaining = int(math.Floor(b.tokens + eps))
	d.reset = max(0, int(math.Ceil((l.burst-b.tokens)/l.rate-eps)))
	return d
}

// give returns n tokens to key's bucket, up to the burst.
func (l *limiter) give(key string, n int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.buckets[key]; ok {
		l.refill(b, now)
		b.tokens = math.Min(l.burst, b.tokens+float64(n))
	}
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if now.After(b.last) {
		b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
		b.last = now
	}
}

// sweep forgets buckets that have refilled completely: a full bucket is what a new key gets, so
// dropping one loses nothing. It runs once a minute, or at once when the map is full; past
// that, arbitrary buckets go, which can only be generous.
func (l *limiter) sweep(now time.Time) {
	full := len(l.buckets) >= l.max
	if !full && now.Sub(l.lastSweep) < limiterSweepEvery && !now.Before(l.lastSweep) {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < l.max {
			break
		}
		delete(l.buckets, k)
	}
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
