package retry_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/retry"
)

func TestDelay(t *testing.T) {
	cases := []struct {
		name    string
		policy  retry.Policy
		attempt int
		want    time.Duration
	}{
		{"second attempt waits the initial interval", retry.Policy{InitialIntervalMs: 1000, BackoffCoefficient: 2}, 2, time.Second},
		{"third doubles", retry.Policy{InitialIntervalMs: 1000, BackoffCoefficient: 2}, 3, 2 * time.Second},
		{"fifth: initial times coefficient cubed", retry.Policy{InitialIntervalMs: 100, BackoffCoefficient: 3}, 5, 2700 * time.Millisecond},
		{"coefficient 1 keeps a fixed pace", retry.Policy{InitialIntervalMs: 250, BackoffCoefficient: 1}, 9, 250 * time.Millisecond},
		{"fractional coefficient", retry.Policy{InitialIntervalMs: 1000, BackoffCoefficient: 1.5}, 4, 2250 * time.Millisecond},
		{"capped at maxIntervalMs", retry.Policy{InitialIntervalMs: 1000, BackoffCoefficient: 10, MaxIntervalMs: 5000}, 4, 5 * time.Second},
		{"without a maximum, capped at the ceiling", retry.Policy{InitialIntervalMs: retry.MaxIntervalMs, BackoffCoefficient: 10}, 10, retry.CeilingMs * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.policy.Delay(c.attempt); got != c.want {
				t.Fatalf("Delay(%d) = %v, want %v", c.attempt, got, c.want)
			}
		})
	}
}

func TestNormalizedFillsDefaults(t *testing.T) {
	p := retry.Policy{NonRetryableErrors: []string{"x"}}.Normalized(3)
	if p.Attempts != 3 || p.InitialIntervalMs != 1000 || p.BackoffCoefficient != 2 || p.MaxIntervalMs != 0 {
		t.Fatalf("normalized %+v", p)
	}
	if p := (retry.Policy{}).Normalized(0); p.Attempts != 1 {
		t.Fatalf("attempts default %d, want 1", p.Attempts)
	}
	if p := (retry.Policy{Attempts: 7, InitialIntervalMs: 200, BackoffCoefficient: 1.5}).Normalized(2); p.Attempts != 7 || p.InitialIntervalMs != 200 || p.BackoffCoefficient != 1.5 {
		t.Fatalf("given values must stay: %+v", p)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	ok := retry.Policy{Attempts: 5, InitialIntervalMs: 100, BackoffCoefficient: 2}
	cases := []struct {
		name  string
		edit  func(*retry.Policy)
		field string
	}{
		{"attempts 0", func(p *retry.Policy) { p.Attempts = 0 }, "r.attempts"},
		{"attempts 11", func(p *retry.Policy) { p.Attempts = 11 }, "r.attempts"},
		{"interval 99", func(p *retry.Policy) { p.InitialIntervalMs = 99 }, "r.initialIntervalMs"},
		{"interval over an hour", func(p *retry.Policy) { p.InitialIntervalMs = 3_600_001 }, "r.initialIntervalMs"},
		{"coefficient below 1", func(p *retry.Policy) { p.BackoffCoefficient = 0.5 }, "r.backoffCoefficient"},
		{"coefficient above 10", func(p *retry.Policy) { p.BackoffCoefficient = 10.5 }, "r.backoffCoefficient"},
		{"max below initial", func(p *retry.Policy) { p.MaxIntervalMs = 50 }, "r.maxIntervalMs"},
		{"max above the ceiling", func(p *retry.Policy) { p.MaxIntervalMs = retry.CeilingMs + 1 }, "r.maxIntervalMs"},
		{"empty code", func(p *retry.Policy) { p.NonRetryableErrors = []string{"ok", " "} }, "r.nonRetryableErrors"},
		{"long code", func(p *retry.Policy) { p.NonRetryableErrors = []string{strings.Repeat("x", 101)} }, "r.nonRetryableErrors"},
	}
	if err := ok.Validate("r"); err != nil {
		t.Fatalf("valid policy: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			c.edit(&p)
			var ve *domain.ValidationError
			if err := p.Validate("r"); !errors.As(err, &ve) || ve.Field != c.field {
				t.Fatalf("want a validation error on %s, got %v", c.field, err)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	p := retry.Policy{NonRetryableErrors: []string{"bad_input", "http_status"}}
	for failure, want := range map[string]bool{
		`{"code":"bad_input","message":"no"}`: false,
		`{"code":"http_status"}`:              false,
		`{"code":"timeout"}`:                  true,
		`{"message":"no code"}`:               true,
		`not json`:                            true,
	} {
		if got := p.Retryable(json.RawMessage(failure)); got != want {
			t.Errorf("Retryable(%s) = %v, want %v", failure, got, want)
		}
	}
	if !(retry.Policy{}).Retryable(json.RawMessage(`{"code":"bad_input"}`)) {
		t.Error("a policy without non-retryable codes retries every failure")
	}
}
