// Package webhook verifies Switchyard's signed webhooks (SPEC.md 6.1) on the receiving side.
//
// A signed delivery carries x-signature-version: v1, x-signature-timestamp (ISO 8601) and
// x-signature: sha256=<lowercase hex HMAC-SHA256, keyed by the callbackSecret, of
// timestamp + "." + raw body>. Verify recomputes the signature over the raw body exactly as
// received (before any JSON decoding), compares in constant time and refuses a timestamp
// outside the tolerance, which bounds how long a captured delivery can be replayed.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Header names of a delivery.
const (
	HeaderDeliveryID         = "x-delivery-id"
	HeaderEvent              = "x-event"
	HeaderSignatureVersion   = "x-signature-version"
	HeaderSignatureTimestamp = "x-signature-timestamp"
	HeaderSignature          = "x-signature"
)

// DefaultTolerance is how far the signature timestamp may be from now when Verify is given 0.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify (test with errors.Is).
var (
	ErrMissingSignature   = errors.New("webhook: the signature headers are missing")
	ErrUnsupportedVersion = errors.New("webhook: unsupported x-signature-version")
	ErrBadTimestamp       = errors.New("webhook: x-signature-timestamp is not an ISO 8601 timestamp")
	ErrStaleTimestamp     = errors.New("webhook: x-signature-timestamp is outside the tolerance")
	ErrBadSignature       = errors.New("webhook: the signature does not match")
)

// Verify checks a delivery's signature with the callbackSecret given at submit, at the current
// time; tolerance 0 means DefaultTolerance.
func Verify(secret string, header http.Header, rawBody []byte, tolerance time.Duration) error {
	return VerifyAt(secret, header, rawBody, tolerance, time.Now())
}

// VerifyAt is Verify at a given time.
func VerifyAt(secret string, header http.Header, rawBody []byte, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	version, ts, sig := header.Get(HeaderSignatureVersion), header.Get(HeaderSignatureTimestamp), header.Get(HeaderSignature)
	if version == "" || ts == "" || sig == "" {
		return ErrMissingSignature
	}
	if version != "v1" {
		return fmt.Errorf("%w: %q", ErrUnsupportedVersion, version)
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ErrBadTimestamp
	}
	if d := now.Sub(at); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s from now", ErrStaleTimestamp, d.Round(time.Second))
	}
	// Compare the whole header value, prefix included, in constant time.
	if !hmac.Equal([]byte(strings.TrimSpace(sig)), []byte(Sign(secret, ts, rawBody))) {
		return ErrBadSignature
	}
	return nil
}

// Sign computes the x-signature value for timestamp and body: "sha256=" and the lowercase hex
// HMAC-SHA256 keyed by secret of timestamp + "." + body.
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
