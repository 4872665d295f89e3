package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The rate limit of SDK requests: a token bucket per API key (or other credential), in this
// process.

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
	return answerLimit(w, d)
}

// answerLimit sets the RateLimit-* headers of d and, when d refuses, answers 429 with
// Retry-After; it reports whether the request may go on. The SDK's limiter and the hooks'
// answer alike.
func answerLimit(w http.ResponseWriter, d decision) bool {
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
