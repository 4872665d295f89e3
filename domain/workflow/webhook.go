package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

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
	// Debounce gathers deliveries before a run starts; its shape is the events trigger's,
	// checked by ParseDebounce (debounce.go) when the component is.
	Debounce json.RawMessage `json:"debounce,omitempty"`
}

// setDefaults trims the scheme, so " github" is read as meant.
func (c *WebhookConfig) setDefaults() { c.Scheme = strings.TrimSpace(c.Scheme) }

// Validate checks the scheme and the transform's length; whether the transform compiles is
// ValidateTransforms' (jq is not the domain's to run).
func (c WebhookConfig) Validate() error {
	switch {
	case c.Scheme == "":
		return domain.Invalid("config.scheme", "is required: one of %s", strings.Join(WebhookSchemes, ", "))
	case !isWebhookScheme(c.Scheme):
		return domain.Invalid("config.scheme", "must be one of %s", strings.Join(WebhookSchemes, ", "))
	case len(c.Transform) > MaxTransformLength:
		return domain.Invalid("config.transform", "must be at most %d characters", MaxTransformLength)
	case c.Transform != "" && strings.TrimSpace(c.Transform) == "":
		return domain.Invalid("config.transform", "must be a jq program, or left out for the body as sent")
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

// TransformCheck compiles an ON_WEBHOOK component's jq transform: nil, or an error saying
// why it does not compile.
type TransformCheck func(transform string) error

// ValidateTransforms checks that the transforms of a definition Validate accepted compile; the
// error names the component ("components[0] (component "push").config.transform").
func (d Definition) ValidateTransforms(check TransformCheck) error {
	for i, c := range d.Components {
		if c.Module != ModuleOnWebhook {
			continue
		}
		cfg, err := ParseWebhook(c.Config)
		if err != nil || cfg.Transform == "" {
			continue // Validate named it
		}
		if err := check(cfg.Transform); err != nil {
			return domain.Invalid(fmt.Sprintf("components[%d] (component %q).config.transform", i, c.ID), "%s", err)
		}
	}
	return nil
}

// checkWebhookConfig checks an ON_WEBHOOK component's config.
func checkWebhookConfig(config json.RawMessage) error {
	if _, err := ParseWebhook(config); err != nil {
		return err
	}
	_, err := ParseDebounce(config) // its shape is the events trigger's (debounce.go)
	return err
}
