package hook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Tolerance is how far a signed timestamp may be from now: it bounds how long a captured
// delivery can be replayed (the schemes with a timestamp; GitHub's has none, and its replays
// are caught by the delivery id instead).
const Tolerance = 5 * time.Minute

// SecretPrefix starts every secret the service draws, in the Standard Webhooks form:
// "whsec_" + base64 of the key.
const SecretPrefix = "whsec_"

// Limits on a secret given at rotation rather than drawn.
const (
	MinSecretLength = 16
	MaxSecretLength = 256
)

// ErrSignature means a delivery's signature is missing, stale or does not match: the
// delivery is refused (401) and nothing is recorded.
var ErrSignature = errors.New("hook: bad signature")

// Header names the schemes read.
const (
	HeaderStandardID        = "webhook-id"
	HeaderStandardTimestamp = "webhook-timestamp"
	HeaderStandardSignature = "webhook-signature"
	HeaderDeliveryID        = "x-delivery-id"
	HeaderSignatureVersion  = "x-signature-version"
	HeaderSignatureTime     = "x-signature-timestamp"
	HeaderSignature         = "x-signature"
	HeaderGitHubSignature   = "x-hub-signature-256"
	HeaderGitHubDelivery    = "x-github-delivery"
)

// Signed is a delivery as received: its headers (by case-insensitive name) and raw body.
type Signed struct {
	Header func(name string) string
	Body   []byte
}

// Verify checks d's signature with secret in scheme at now, comparing in constant time, and
// returns the delivery's id: the one the scheme's headers carry, else the hex SHA-256 of the
// body (so a redelivered body is the same delivery). A refusal wraps ErrSignature.
func Verify(scheme, secret string, d Signed, now time.Time) (string, error) {
	switch scheme {
	case workflow.SchemeStandardWebhooks:
		return verifyStandard(secret, d, now)
	case workflow.SchemeHMACSHA256V1:
		return verifyV1(secret, d, now)
	case workflow.SchemeGitHub:
		return verifyGitHub(secret, d)
	}
	return "", fmt.Errorf("%w: unknown scheme %q", ErrSignature, scheme)
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrSignature}, args...)...)
}

// verifyStandard is https://www.standardwebhooks.com: HMAC-SHA256 keyed by the base64 key of
// a "whsec_" secret, over "<webhook-id>.<webhook-timestamp>.<body>"; webhook-signature lists
// space-separated "v1,<base64>" signatures, any of which may match (a sender rotating its
// secret signs with both).
func verifyStandard(secret string, d Signed, now time.Time) (string, error) {
	id, ts, sigs := strings.TrimSpace(d.Header(HeaderStandardID)), strings.TrimSpace(d.Header(HeaderStandardTimestamp)), d.Header(HeaderStandardSignature)
	if id == "" || ts == "" || sigs == "" {
		return "", refuse("webhook-id, webhook-timestamp and webhook-signature are required")
	}
	if err := checkTime(ts, unixSeconds, now); err != nil {
		return "", err
	}
	key, err := StandardKey(secret)
	if err != nil {
		return "", err
	}
	want := []byte(SignStandard(key, id, ts, d.Body))
	for sig := range strings.FieldsSeq(sigs) {
		if hmac.Equal([]byte(sig), want) {
			return id, nil
		}
	}
	return "", refuse("webhook-signature does not match")
}

// StandardKey is the HMAC key of a Standard Webhooks secret: the base64 after "whsec_".
func StandardKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, errors.New("hook: the secret is not whsec_<base64>")
	}
	return key, nil
}

// SignStandard is the webhook-signature entry of a Standard Webhooks delivery.
func SignStandard(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + timestamp + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// verifyV1 is SPEC.md 6.1, the scheme Switchyard signs its own webhooks with (and
// client/webhook verifies): x-signature-version v1, x-signature-timestamp ISO 8601 and
// x-signature "sha256=<hex HMAC-SHA256 of timestamp.body>", keyed by the secret as text.
func verifyV1(secret string, d Signed, now time.Time) (string, error) {
	version, ts, sig := d.Header(HeaderSignatureVersion), d.Header(HeaderSignatureTime), d.Header(HeaderSignature)
	if version == "" || ts == "" || sig == "" {
		return "", refuse("x-signature-version, x-signature-timestamp and x-signature are required")
	}
	if version != "v1" {
		return "", refuse("x-signature-version must be v1")
	}
	if err := checkTime(ts, iso8601, now); err != nil {
		return "", err
	}
	if !hmac.Equal([]byte(strings.TrimSpace(sig)), []byte(SignV1(secret, ts, d.Body))) {
		return "", refuse("x-signature does not match")
	}
	return deliveryID(d.Header(HeaderDeliveryID), d.Body), nil
}

// SignV1 is the x-signature of SPEC.md 6.1: the same computation as reactors/webhooks.Sign and
// client/webhook.Sign (domain imports neither; a test holds them equal).
func SignV1(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp + "."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// verifyGitHub is GitHub's X-Hub-Signature-256: "sha256=<hex HMAC-SHA256 of the body>" keyed
// by the secret as text; X-GitHub-Delivery names the delivery (a redelivery keeps it).
func verifyGitHub(secret string, d Signed) (string, error) {
	sig := strings.TrimSpace(d.Header(HeaderGitHubSignature))
	if sig == "" {
		return "", refuse("X-Hub-Signature-256 is required")
	}
	if !hmac.Equal([]byte(sig), []byte(SignGitHub(secret, d.Body))) {
		return "", refuse("X-Hub-Signature-256 does not match")
	}
	return deliveryID(d.Header(HeaderGitHubDelivery), d.Body), nil
}

// SignGitHub is the X-Hub-Signature-256 of a body.
func SignGitHub(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// MaxDeliveryIDLength bounds a delivery id taken from a header; a longer one is replaced by
// the hash of the body.
const MaxDeliveryIDLength = 200

// deliveryID is the header's id when it is usable text, else the hex SHA-256 of the body.
func deliveryID(header string, body []byte) string {
	id := strings.TrimSpace(header)
	if id != "" && len(id) <= MaxDeliveryIDLength && utf8.ValidString(id) && !strings.ContainsRune(id, 0) {
		return id
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

type timeForm int

const (
	unixSeconds timeForm = iota
	iso8601
)

func checkTime(ts string, form timeForm, now time.Time) error {
	var at time.Time
	switch form {
	case unixSeconds:
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return refuse("webhook-timestamp must be Unix seconds")
		}
		at = time.Unix(n, 0)
	default:
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return refuse("x-signature-timestamp must be an ISO 8601 timestamp")
		}
		at = t
	}
	if d := now.Sub(at); d > Tolerance || d < -Tolerance {
		return refuse("the timestamp is more than %s from now", Tolerance)
	}
	return nil
}

// CheckSecret checks a secret given at rotation for scheme: a Standard Webhooks secret is
// "whsec_" + base64 (the form its senders hand out); the others are text the sender keys its
// HMAC with.
func CheckSecret(scheme, secret string) error {
	n := utf8.RuneCountInString(secret)
	switch {
	case n < MinSecretLength || n > MaxSecretLength:
		return domain.Invalid("secret", "must be %d to %d characters", MinSecretLength, MaxSecretLength)
	case !utf8.ValidString(secret) || strings.ContainsAny(secret, "\x00\r\n"):
		return domain.Invalid("secret", "must be one line of UTF-8 text")
	}
	if scheme == workflow.SchemeStandardWebhooks {
		if _, err := StandardKey(secret); err != nil {
			return domain.Invalid("secret", "must be whsec_<base64> for %s", scheme)
		}
	}
	return nil
}

// NewSecret is the secret drawn from random bytes (RandomBytes of them): usable in every
// scheme, as text or as a Standard Webhooks key.
func NewSecret(random []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(random)
}
