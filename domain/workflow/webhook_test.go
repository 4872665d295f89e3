package workflow

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
)

func TestParseWebhook(t *testing.T) {
	cases := []struct {
		config string
		field  string // "" when valid
	}{
		{`{"scheme": "standard-webhooks"}`, ""},
		{`{"scheme": " github "}`, ""},
		{`{"scheme": "hmac-sha256-v1", "transform": "{action: .action, repo: .repository.full_name}"}`, ""},
		{`{"scheme": "github", "debounce": {"quietMs": 1000}}`, ""},
		{`{}`, "config.scheme"},
		{`{"scheme": "stripe"}`, "config.scheme"},
		{`{"scheme": "github", "transform": "  "}`, "config.transform"},
		{`{"scheme": "github", "transform": "` + strings.Repeat(".", MaxTransformLength+1) + `"}`, "config.transform"},
		{`{"scheme": "github", "secret": "x"}`, "config"},
		{`{"scheme": 1}`, "config"},
	}
	for _, tc := range cases {
		c, err := ParseWebhook([]byte(tc.config))
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.config, err)
			}
			continue
		}
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%.80s: %v (%+v), want a 400 naming %s", tc.config, err, c, tc.field)
		}
	}
	c, _ := ParseWebhook([]byte(`{"scheme": " github ", "debounce": {"quietMs": 1000}}`))
	if c.Scheme != SchemeGitHub || string(c.Debounce) != `{"quietMs": 1000}` {
		t.Fatalf("config %+v: the scheme trimmed, the debounce kept as sent", c)
	}
}

func TestWebhookComponentInADefinition(t *testing.T) {
	d := Definition{Name: "hooked", Components: []Component{{ID: "hook", Module: ModuleOnWebhook, Config: []byte(`{"scheme": "github"}`)}}}
	d.Normalize(func() string { return "x" })
	if err := d.Validate(nil); err != nil {
		t.Fatal(err)
	}
	d.Components[0].Config = []byte(`{"scheme": "github", "transform": "{"}`)
	refuse := func(string) error { return errors.New("jq syntax error") }
	var ve *domain.ValidationError
	if err := d.ValidateTransforms(refuse); !errors.As(err, &ve) || ve.Field != `components[0] (component "hook").config.transform` {
		t.Fatalf("a transform that does not compile: %v, want a 400 naming config.transform", err)
	}
	d.Components[0].Config = []byte(`{"scheme": "github"}`)
	if err := d.ValidateTransforms(refuse); err != nil {
		t.Fatalf("no transform, nothing to compile: %v", err)
	}
}

// An ON_WEBHOOK component's debounce is checked as an ON_EVENT's is, when the definition is.
func TestWebhookDebounceIsChecked(t *testing.T) {
	d := Definition{Name: "hooked", Components: []Component{{ID: "hook", Module: ModuleOnWebhook,
		Config: []byte(`{"scheme": "github", "debounce": {"key": "payload.repo", "quietMs": 1000}}`)}}}
	d.Normalize(func() string { return "x" })
	if err := d.Validate(nil); err != nil {
		t.Fatalf("a debounced hook: %v", err)
	}
	d.Components[0].Config = []byte(`{"scheme": "github", "debounce": {"key": "payload.repo"}}`)
	var ve *domain.ValidationError
	if err := d.Validate(nil); !errors.As(err, &ve) || !strings.Contains(ve.Field, "debounce.quietMs") {
		t.Fatalf("a debounce without quietMs: %v, want a 400 naming debounce.quietMs", err)
	}
}
