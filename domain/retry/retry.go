// Package retry is a workflow stage's retry policy (components[].retry): how many attempts,
// the exponential backoff between them, and the failure codes that are never retried. A
// stage's execution carries the policy in its submit, so every decision about its attempts,
// on any instance and after any restart, reads it from the log.
package retry

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Limits and defaults of a policy.
const (
	MinAttempts               = 1
	MaxAttempts               = 10
	MinIntervalMs             = 100
	MaxIntervalMs             = 3_600_000
	DefaultInitialIntervalMs  = 1000
	DefaultBackoffCoefficient = 2
	MaxBackoffCoefficient     = 10
	// CeilingMs bounds every delay, and maxIntervalMs: without it a policy of ten attempts
	// could wait centuries before its last.
	CeilingMs = 86_400_000
	// MaxNonRetryable bounds nonRetryableErrors, MaxCodeLength each code.
	MaxNonRetryable = 50
	MaxCodeLength   = 100
)

// Policy is the retry policy of a stage. Attempts counts every try, the first included.
type Policy struct {
	Attempts           int      `json:"attempts"`
	InitialIntervalMs  int64    `json:"initialIntervalMs"`
	BackoffCoefficient float64  `json:"backoffCoefficient"`
	MaxIntervalMs      int64    `json:"maxIntervalMs,omitempty"`
	NonRetryableErrors []string `json:"nonRetryableErrors,omitempty"`
}

// Normalized fills the defaults: attempts from fallback (the component's attempts) when
// absent, initialIntervalMs 1000, backoffCoefficient 2. It returns a copy.
func (p Policy) Normalized(fallback int) Policy {
	if p.Attempts == 0 {
		p.Attempts = max(fallback, MinAttempts)
	}
	if p.InitialIntervalMs == 0 {
		p.InitialIntervalMs = DefaultInitialIntervalMs
	}
	if p.BackoffCoefficient == 0 {
		p.BackoffCoefficient = DefaultBackoffCoefficient
	}
	p.NonRetryableErrors = slices.Clone(p.NonRetryableErrors)
	return p
}

// Validate checks a normalized policy; errors name field + ".attempts" and so on.
func (p Policy) Validate(field string) error {
	switch {
	case p.Attempts < MinAttempts || p.Attempts > MaxAttempts:
		return domain.Invalid(field+".attempts", "must be an integer from %d to %d", MinAttempts, MaxAttempts)
	case p.InitialIntervalMs < MinIntervalMs || p.InitialIntervalMs > MaxIntervalMs:
		return domain.Invalid(field+".initialIntervalMs", "must be from %d to %d", MinIntervalMs, MaxIntervalMs)
	case math.IsNaN(p.BackoffCoefficient) || p.BackoffCoefficient < 1 || p.BackoffCoefficient > MaxBackoffCoefficient:
		return domain.Invalid(field+".backoffCoefficient", "must be a number from 1 to %d", MaxBackoffCoefficient)
	case p.MaxIntervalMs != 0 && (p.MaxIntervalMs < p.InitialIntervalMs || p.MaxIntervalMs > CeilingMs):
		return domain.Invalid(field+".maxIntervalMs", "must be from initialIntervalMs (%d) to %d", p.InitialIntervalMs, CeilingMs)
	case len(p.NonRetryableErrors) > MaxNonRetryable:
		return domain.Invalid(field+".nonRetryableErrors", "must list at most %d codes", MaxNonRetryable)
	}
	for i, code := range p.NonRetryableErrors {
		if strings.TrimSpace(code) == "" || len(code) > MaxCodeLength {
			return domain.Invalid(field+".nonRetryableErrors", "entry %d must be a code of 1 to %d characters", i, MaxCodeLength)
		}
		if err := domain.CheckStorableString(field+".nonRetryableErrors", code); err != nil {
			return err
		}
	}
	return nil
}

// Delay is the wait before attempt n (n >= 2): initialIntervalMs · coefficient^(n-2), capped
// at maxIntervalMs (at CeilingMs without one). No jitter: the policy's pace is the user's.
func (p Policy) Delay(attempt int) time.Duration {
	limit := float64(CeilingMs)
	if p.MaxIntervalMs > 0 {
		limit = float64(p.MaxIntervalMs)
	}
	ms := float64(p.InitialIntervalMs) * math.Pow(p.BackoffCoefficient, float64(max(attempt-2, 0)))
	return time.Duration(min(ms, limit)) * time.Millisecond
}

// Retryable reports whether a failure (the JSON error of a failed attempt) may be retried
// under the policy: its code is not one of nonRetryableErrors.
func (p Policy) Retryable(failure json.RawMessage) bool {
	if len(p.NonRetryableErrors) == 0 {
		return true
	}
	var f struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(failure, &f) != nil {
		return true
	}
	return !slices.Contains(p.NonRetryableErrors, f.Code)
}
