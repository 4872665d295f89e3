package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/switchyard/switchyard/domain"
)

// The signature schemes an ON_WEBHOOK component verifies its deliveries with.
const (
	// SchemeStandardWebhooks is https://www.standardwebhooks.com: webhook-id,
	// webhook-timestamp and webhook-signature "v1,<base64 HMAC-SHA256>".
	SchemeStandardWebhooks = "standard-webhooks"
	// SchemeHMACSHA256V1 is the scheme Switchyard signs its own webhooks with (SPEC.md 6.1).
	SchemeHMACSHA256V1 = "hmac-sha256-v1"
	// SchemeGitHub is GitHub's X-Hub-Signature-256: sha256=<hex>.
	SchemeGitHub = "github"
)

// WebhookSchemes lists the schemes an ON_WEBHOOK component may name.
var WebhookSchemes = []string{SchemeStandardWebhooks, SchemeHMACSHA256V1, SchemeGitHub}

// MaxTransformLength bounds an ON_WEBHOOK component's jq transform.
const MaxTransformLength = 10000

// WebhookConfig is an ON_WEBHOOK component's config.
type WebhookConfig struct {
	// Scheme is how deliveries are signed: one of WebhookSchemes. Required: a sender signs in
	// one scheme, and a default guessed wrong would refuse every delivery with 401.
	Scheme string `json:"scheme"`
	// Transform is a jq program that reshapes a delivery's body into the run's trigger body;
	// empty: the body as sent.
	Transform string `json:"transform,omitempty"`
	// Debounce gathers deliveries before a run starts; its shape is the events trigger's and is
	// checked where debounce is parsed (debounce.go), not here.
	Debounce json.RawMessage `json:"debounce,omitempty"`
}

// setDefaults trims the scheme, so " github" is read as meant.
func (c *WebhookConfig) setDefaults() { c.Scheme = strings.TrimSpace(c.Scheme) }

// Validate checks the scheme and that the transform compiles.
func (c WebhookConfig) Validate() error {
	switch {
	case c.Scheme == "":
		return domain.Invalid("config.scheme", "is required: one of %s", strings.Join(WebhookSchemes, ", "))
	case !isWebhookScheme(c.Scheme):
		return domain.Invalid("config.scheme", "must be one of %s", strings.Join(WebhookSchemes, ", "))
	case len(c.Transform) > MaxTransformLength:
		return domain.Invalid("config.transform", "must be at most %d characters", MaxTransformLength)
	}
	if c.Transform != "" {
		if _, err := CompileTransform(c.Transform); err != nil {
			return err
		}
	}
	return nil
}

func isWebhookScheme(s string) bool {
	for _, k := range WebhookSchemes {
		if s == k {
			return true
		}
	}
	return false
}

// ParseWebhook reads and checks an ON_WEBHOOK component's config.
func ParseWebhook(config json.RawMessage) (WebhookConfig, error) {
	var c WebhookConfig
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, domain.Invalid("config", "must be {\"scheme\": %s, \"transform\": jq, \"debounce\": {...}}: %v",
			strings.Join(WebhookSchemes, " | "), err)
	}
	c.setDefaults()
	return c, c.Validate()
}

// CompileTransform compiles a jq transform with no environment ($ENV is empty), no modules and
// no input/inputs: the program sees the delivery's body alone.
func CompileTransform(src string) (*gojq.Code, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			return nil, domain.Invalid("config.transform", "jq syntax error at offset %d: %v", pe.Offset, err)
		}
		return nil, domain.Invalid("config.transform", "jq syntax error: %v", err)
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, domain.Invalid("config.transform", "jq compile error: %v", err)
	}
	return code, nil
}

// checkWebhookConfig checks an ON_WEBHOOK component's config.
func checkWebhookConfig(config json.RawMessage) error {
	_, err := ParseWebhook(config)
	return err
}
