package httpapi

import (
	"context"
	"crypto/ed25519"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/apikey"
	"github.com/switchyard/switchyard/internal/apikeys"
)

// The API key of a signed SDK request: found through a cache, concurrent misses sharing one
// lookup, with the store reads of unknown keys throttled per client address.

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
	// verifier is PublicKey prepared once when the key is cached (verify).
	verifier *apikeys.Verifier
}

// verify reports whether sig is the key's signature of msg.
func (k SDKKey) verify(msg, sig []byte) bool {
	if k.verifier == nil {
		return apikeys.Verify(k.PublicKey, msg, sig)
	}
	return k.verifier.Verify(msg, sig)
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
		// A stored key this broken is a server fault, not the caller's bad signature.
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
		v := apikeys.NewVerifier(k.PublicKey)
		k.verifier = &v
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
