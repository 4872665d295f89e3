package httpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/singleflight"

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

// Defaults of SDKAuthOptions.
const (
	DefaultSDKSkew      = 300 * time.Second
	DefaultSDKCacheTTL  = 5 * time.Second
	MaxSDKCacheTTL      = 5 * time.Second
	DefaultSDKRate      = 50
	DefaultSDKBurst     = 100
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

// LookupFromStore adapts a fold of the key's stream, such as commands.Handler.APIKey, to a
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

// SDKAuthOptions configures SDKAuth. Zero values take the defaults noted.
type SDKAuthOptions struct {
	// Lookup finds keys; required.
	Lookup KeyLookup
	// Replay remembers accepted signatures. Nil: an in-memory guard on the Now clock, which only
	// sees this process's requests; several serve processes need a shared guard (internal/replay).
	Replay ReplayGuard
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
	// Logger receives internal failures (lookups, the replay guard).
	Logger logrus.FieldLogger
}

// SDKAuth authenticates and rate-limits SDK requests (SPEC.md 5, 7, 8).
type SDKAuth struct {
	opts    SDKAuthOptions
	cache   *keyCache
	flight  singleflight.Group
	limiter *limiter
}

// NewSDKAuth returns the middleware; it panics without a Lookup, a wiring mistake.
func NewSDKAuth(opts SDKAuthOptions) *SDKAuth {
	if opts.Lookup == nil {
		panic("httpapi: NewSDKAuth needs a KeyLookup")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Skew <= 0 {
		opts.Skew = DefaultSDKSkew
	}
	if opts.CacheTTL <= 0 || opts.CacheTTL > MaxSDKCacheTTL {
		opts.CacheTTL = DefaultSDKCacheTTL
	}
	if opts.RatePerSecond <= 0 || math.IsNaN(opts.RatePerSecond) || math.IsInf(opts.RatePerSecond, 0) {
		opts.RatePerSecond = DefaultSDKRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultSDKBurst
	}
	if opts.Replay == nil {
		opts.Replay = newMemoryReplayGuard(opts.Now)
	}
	opts.Logger = logger(opts.Logger)
	return &SDKAuth{
		opts:    opts,
		cache:   &keyCache{ttl: opts.CacheTTL, max: maxCachedKeys, entries: map[string]cachedKey{}},
		limiter: newLimiter(opts.RatePerSecond, opts.Burst, maxLimitedKeys),
	}
}

// Route authenticates, rate-limits with cost tokens (submit component costs 2, others 1), sets
// the RateLimit-* headers and puts the Caller in the request context.
func (a *SDKAuth) Route(cost int, h http.Handler) http.Handler {
	if cost < 1 {
		cost = 1
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
		if !a.fresh(w, r, sig, ts) {
			return
		}
		if !a.limit(w, key.ID, cost, now) {
			return
		}
		caller := Caller{KeyID: key.ID, WorkspaceID: key.WorkspaceID, AllowedWorkflowIDs: append([]string{}, key.AllowedWorkflowIDs...)}
		ctx := WithCaller(r.Context(), caller)
		ctx = WithLogger(ctx, LoggerFrom(ctx).WithFields(logrus.Fields{"workspaceId": key.WorkspaceID, "apiKeyId": key.ID}))
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Limit spends cost tokens of key's bucket in the limiter of the SDK endpoints and sets the
// RateLimit-* headers; when the bucket is short it answers 429 with Retry-After and reports
// false. Other credentials (MCP tokens) share the limiter, and so its configuration, under
// keys of their own.
func (a *SDKAuth) Limit(w http.ResponseWriter, key string, cost int) bool {
	return a.limit(w, key, max(cost, 1), a.opts.Now())
}

func (a *SDKAuth) limit(w http.ResponseWriter, key string, cost int, now time.Time) bool {
	d := a.limiter.take(key, cost, now)
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
		a.log(r).WithError(err).Error("sdk auth: replay guard")
		WriteError(w, http.StatusInternalServerError, "internal error")
		return false
	}
	if seen {
		WriteError(w, http.StatusUnauthorized, MsgInvalidSignature)
		return false
	}
	return true
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
	key, found, err := a.key(r.Context(), id, now)
	if err != nil {
		a.log(r).WithError(err).Error("sdk auth: key lookup")
		WriteError(w, http.StatusInternalServerError, "internal error")
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

// key returns the key with id from the cache or the lookup; found is false for an unknown key.
// Concurrent misses for one id share a single lookup.
func (a *SDKAuth) key(ctx context.Context, id string, now time.Time) (SDKKey, bool, error) {
	if c, ok := a.cache.get(id, now); ok {
		return c.key, c.found, nil
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
		return c, nil
	})
	if err != nil {
		return SDKKey{}, false, err
	}
	c := v.(cachedKey)
	return c.key, c.found, nil
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
		b.tokens = math.Max(0, b.tokens-c)
		d.allowed = true
	} else {
		d.retryAfter = max(1, int(math.Ceil((c-b.tokens)/l.rate-eps)))
	}
	d.remaining = int(math.Floor(b.tokens + eps))
	d.reset = max(0, int(math.Ceil((l.burst-b.tokens)/l.rate-eps)))
	return d
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
