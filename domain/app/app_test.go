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
	if _, err := DecideApprove(s, "staff", 1, now); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("approve a draft: %v", err)
	}
	apply(DecideIssueSecret(s, "h1", now))
	apply(DecideSubmit(s, now))
	apply(DecideApprove(s, "staff", 1, now))
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

func TestApprovalNamesTheRevision(t *testing.T) {
	now := time.Now()
	m := Metadata{Name: "A", RedirectURIs: []string{"https://a.example/cb"}, Scopes: []string{"openid"}}
	swapped := Metadata{Name: "A", RedirectURIs: []string{"https://evil.example/cb"}, Scopes: []string{"openid", "workspace:admin"}}
	var s State
	apply := func(evs []domain.Event, err error) []domain.Event {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			s = s.Evolve(e)
		}
		return evs
	}
	apply(DecideRegister(s, Register{ClientID: "c", OwnerUserID: "u", Metadata: m}, now))
	apply(DecideSubmit(s, now))
	if s.Revision != 1 || s.Status != StatusSubmitted {
		t.Fatalf("submitted: %+v", s)
	}
	if evs := apply(DecideUpdate(s, m, now)); len(evs) != 0 || s.Status != StatusSubmitted {
		t.Fatalf("saving the same metadata: %v, status %s", evs, s.Status)
	}
	evs := apply(DecideUpdate(s, swapped, now))
	if len(evs) != 2 || evs[1] != (ReturnedToDraft{ClientID: "c", Reason: ReasonEdited, At: now.UTC()}) {
		t.Fatalf("edit of a submitted app: %v", evs)
	}
	if s.Revision != 2 || s.Status != StatusDraft {
		t.Fatalf("after the edit: revision %d status %s", s.Revision, s.Status)
	}
	if _, err := DecideApprove(s, "staff", 1, now); !errors.Is(err, ErrRevisionChanged) || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("approve the revision seen, edited since: %v", err)
	}
	apply(DecideSubmit(s, now))
	if _, err := DecideApprove(s, "staff", 1, now); !errors.Is(err, ErrRevisionChanged) {
		t.Fatalf("approve the revision seen, edited and resubmitted: %v", err)
	}
	for _, rev := range []int{0, -1} {
		var ve *domain.ValidationError
		if _, err := DecideApprove(s, "staff", rev, now); !errors.As(err, &ve) || ve.Field != "revision" {
			t.Fatalf("approve revision %d: %v", rev, err)
		}
	}
	evs = apply(DecideApprove(s, "staff", 2, now))
	if a, ok := evs[0].(Approved); !ok || a.Revision != 2 || !s.Live() || s.Metadata.Name != "A" {
		t.Fatalf("approve the current revision: %v %+v", evs, s)
	}
	if evs := apply(DecideApprove(s, "staff", 2, now)); len(evs) != 0 {
		t.Fatalf("approve again: %v", evs)
	}
	if _, err := DecideApprove(s, "staff", 1, now); !errors.Is(err, ErrRevisionChanged) {
		t.Fatalf("approve an older revision of a live app: %v", err)
	}
}
