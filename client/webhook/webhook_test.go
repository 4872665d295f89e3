package webhook_test

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/client/webhook"
)

// The worked example of docs/webhooks.md.
const (
	exampleSecret    = "whsec_example_secret"
	exampleTimestamp = "2026-01-15T10:30:00.000Z"
	exampleBody      = `{"id":"0b6f8a52-5c1e-4c2a-9f4e-2d7c9a1b3e55","status":"COMPLETED"}`
	exampleSignature = "sha256=0930c21b8c6f16feef6ca1485847b06116ecefbbc5ab353f1fe3c7ae9e6f739a"
)

func TestDocumentedExample(t *testing.T) {
	if got := webhook.Sign(exampleSecret, exampleTimestamp, []byte(exampleBody)); got != exampleSignature {
		t.Fatalf("Sign = %s, want %s", got, exampleSignature)
	}
	doc, err := os.ReadFile("../../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{exampleSecret, exampleTimestamp, exampleBody, "x-signature: " + exampleSignature} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("docs/webhooks.md does not show %q", s)
		}
	}
}

func header(version, ts, sig string) http.Header {
	h := http.Header{}
	for k, v := range map[string]string{"x-signature-version": version, "x-signature-timestamp": ts, "x-signature": sig} {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

func TestVerifyAt(t *testing.T) {
	at, _ := time.Parse(time.RFC3339, exampleTimestamp)
	body := []byte(exampleBody)
	tests := []struct {
		name string
		h    http.Header
		body []byte
		now  time.Time
		tol  time.Duration
		want error
	}{
		{"valid", header("v1", exampleTimestamp, exampleSignature), body, at.Add(time.Minute), 0, nil},
		{"default tolerance is 5 minutes", header("v1", exampleTimestamp, exampleSignature), body, at.Add(6 * time.Minute), 0, webhook.ErrStaleTimestamp},
		{"future beyond tolerance", header("v1", exampleTimestamp, exampleSignature), body, at.Add(-2 * time.Minute), time.Minute, webhook.ErrStaleTimestamp},
		{"wider tolerance", header("v1", exampleTimestamp, exampleSignature), body, at.Add(time.Hour), 2 * time.Hour, nil},
		{"tampered body", header("v1", exampleTimestamp, exampleSignature), []byte(exampleBody + " "), at, 0, webhook.ErrBadSignature},
		{"other timestamp", header("v1", "2026-01-15T10:30:01.000Z", exampleSignature), body, at, 0, webhook.ErrBadSignature},
		{"uppercase hex", header("v1", exampleTimestamp, strings.ToUpper(exampleSignature)), body, at, 0, webhook.ErrBadSignature},
		{"missing signature", header("v1", exampleTimestamp, ""), body, at, 0, webhook.ErrMissingSignature},
		{"unknown version", header("v2", exampleTimestamp, exampleSignature), body, at, 0, webhook.ErrUnsupportedVersion},
		{"bad timestamp", header("v1", "yesterday", exampleSignature), body, at, 0, webhook.ErrBadTimestamp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := webhook.VerifyAt(exampleSecret, tc.h, tc.body, tc.tol, tc.now)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if err := webhook.VerifyAt("other secret", header("v1", exampleTimestamp, exampleSignature), body, 0, at); !errors.Is(err, webhook.ErrBadSignature) {
		t.Fatalf("wrong secret: %v", err)
	}
}
