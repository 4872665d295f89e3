package identity_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
)

// TestLookAlikeAddressesAreRefused: an address that reads as another account's (a Cyrillic а
// in alice) cannot become a second account, nor be signed in with (400 naming email), while
// ordinary addresses (case, plus-addressing, an IDN domain in one script, given as an A-label
// or not) register once and sign in.
func TestLookAlikeAddressesAreRefused(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	register := func(email string) error {
		_, err := r.cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: testPassword})
		return err
	}
	login := func(email string) (int, string) {
		st, body := r.api("POST", "/v1/auth/login", "", map[string]any{"email": email, "password": testPassword})
		msg, _ := body["message"].(string)
		return st, msg
	}
	for _, email := range []string{"alice@a.test", "Bob+Invoices@A.Test", "user@Bücher.example", "иван@почта.рф"} {
		if err := register(email); err != nil {
			t.Fatalf("register %s: %v", email, err)
		}
	}
	for _, email := range []string{"ALICE@a.test", " alice@A.TEST", "ａlice@a.test", "user@xn--bcher-kva.example"} {
		if err := register(email); !errors.Is(err, domain.ErrAlreadyExists) {
			t.Errorf("register %s again: %v, want already exists", email, err)
		}
	}
	for _, email := range []string{"аlice@a.test", "alice@а.test", "alicе@a.test", "аре@a.test"} {
		var ve *domain.ValidationError
		if err := register(email); !errors.As(err, &ve) || ve.Field != "email" {
			t.Errorf("register look-alike %q: %v, want a refusal of email", email, err)
		}
		if st, msg := login(email); st != http.StatusBadRequest || !strings.HasPrefix(msg, "email: ") {
			t.Errorf("sign in with look-alike %q: %d %q", email, st, msg)
		}
	}
	for email, id := range map[string]string{"Alice@A.Test": "alice@a.test", "bob+invoices@a.test": "bob+invoices@a.test",
		"user@xn--bcher-kva.example": "user@bücher.example", "ИВАН@ПОЧТА.РФ": "иван@почта.рф"} {
		if st, msg := login(email); st != http.StatusOK {
			t.Errorf("sign in as %s: %d %q", email, st, msg)
		}
		if u, err := r.cmds.Identity.UserByEmail(ctx, email); err != nil || u.Email != id {
			t.Errorf("UserByEmail(%s) = %q, %v; want %s", email, u.Email, err, id)
		}
	}
	// The sign-in form says what is wrong with the address, with a 400.
	b := r.browser()
	f := hidden(b.do("GET", "/login", nil).body)
	f.Set("email", "аlice@a.test")
	f.Set("password", testPassword)
	if p := b.do("POST", "/login", f); p.status != http.StatusBadRequest || !strings.Contains(p.body, "mixes scripts") {
		t.Fatalf("sign-in form with a look-alike: %d %s", p.status, p.body)
	}
}
