package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
)

func TestRegistryRoundTrip(t *testing.T) {
	in := billing.CreditsPurchased{WorkspaceID: "w", Amount: 1500, Reference: "r", At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := domain.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := domain.Events.Decode(in.EventType(), b)
	if err != nil {
		t.Fatal(err)
	}
	if out.(billing.CreditsPurchased) != in {
		t.Fatalf("round trip %+v != %+v", out, in)
	}
	if _, err := domain.Events.Decode("Nope", b); !errors.Is(err, domain.ErrUnknownEventType) {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := domain.Events.Decode(in.EventType(), []byte("{")); err == nil {
		t.Fatal("bad json decoded")
	}
}
