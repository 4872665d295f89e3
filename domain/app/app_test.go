package app

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
)

func TestRedirectURIs(t *testing.T) {
	for uri, ok := range map[string]bool{
		"https://a.example/cb": true, "http://localhost:3000/cb": true, "http://127.0.0.1/cb": true,
		"http://a.example/cb": false, "https://a.example/cb#x": false, "javascript:alert(1)": false, "/cb": false,
		"https://user:pw@a.example/cb": false, "custom:/cb": false,
	} {
		if err := ValidateRedirectURI(uri); (err == nil) != ok {
			t.Errorf("%s: %v", uri, err)
		}
	}
}

func TestLifecycle(t *testing.T) {
	now := time.Now()
	m := Metadata{Name: "A", RedirectURIs: []string{"https://a.example/cb"}, Scopes: []string{"openid"}}
	var s State
	apply := func(evs []domain.Event, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			s = s.Evolve(e)
		}
	}
	apply(DecideRegister(s, Register{ClientID: "c", OwnerUserID: "u", Metadata: m}, now))
	if _, err := DecideApprove(s, "staff", now); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("approve a draft: %v", err)
	}
	apply(DecideIssueSecret(s, "h1", now))
	apply(DecideSubmit(s, now))
	apply(DecideApprove(s, "staff", now))
	if !s.Live() {
		t.Fatal("not live after approval")
	}
	if _, err := DecideUpdate(s, m, now); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("edit approved: %v", err)
	}
	apply(DecideRevert(s, "staff", "why", now))
	if s.Live() || s.SecretHash != "" || s.Status != StatusDraft {
		t.Fatalf("after revert: %+v", s)
	}
	if _, err := DecideUpdate(s, Metadata{Name: "B", RedirectURIs: []string{"https://a.example/cb"}, Scopes: []string{"openid", "nope"}}, now); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("unknown scope: %v", err)
	}
	apply(DecideUpdate(s, Metadata{Name: "B", RedirectURIs: []string{"https://a.example/cb"}, Scopes: []string{"openid"}}, now))
}
