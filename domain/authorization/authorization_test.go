package authorization

import (
	"errors"
	"testing"
	"time"
)

func granted(t *testing.T, now time.Time) State {
	t.Helper()
	evs, err := DecideGrant(State{}, Grant{ID: "a", UserID: "u", ClientID: "c", WorkspaceID: "w", Scopes: []string{"openid"},
		CodeHash: HashToken("code"), CodeChallenge: S256(verifier), RedirectURI: "https://x/cb", CodeTTL: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	return State{}.Evolve(evs[0])
}

var verifier = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"

func TestRedeem(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := granted(t, now)
	ok := Redeem{CodeHash: HashToken("code"), ClientID: "c", RedirectURI: "https://x/cb", Verifier: verifier, RefreshHash: "r1", RefreshTTL: time.Hour}
	cases := []struct {
		name string
		mod  func(*Redeem)
		at   time.Time
		want error
	}{
		{"wrong verifier", func(r *Redeem) { r.Verifier = verifier + "x" }, now, ErrInvalidGrant},
		{"short verifier", func(r *Redeem) { r.Verifier = "abc" }, now, ErrInvalidGrant},
		{"other client", func(r *Redeem) { r.ClientID = "d" }, now, ErrInvalidGrant},
		{"other redirect", func(r *Redeem) { r.RedirectURI = "https://x/other" }, now, ErrInvalidGrant},
		{"wrong code", func(r *Redeem) { r.CodeHash = HashToken("nope") }, now, ErrInvalidGrant},
		{"expired at 60 s", func(*Redeem) {}, now.Add(time.Minute), ErrInvalidGrant},
		{"in time", func(*Redeem) {}, now.Add(59 * time.Second), nil},
	}
	for _, c := range cases {
		r := ok
		c.mod(&r)
		_, err := DecideRedeem(s, r, c.at)
		if !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	evs, _ := DecideRedeem(s, ok, now)
	s = s.Evolve(evs[0])
	if _, err := DecideRedeem(s, ok, now); !errors.Is(err, ErrReplay) {
		t.Fatalf("second redemption: %v", err)
	}
}

func TestRefreshChain(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := granted(t, now)
	evs, _ := DecideRedeem(s, Redeem{CodeHash: HashToken("code"), ClientID: "c", RedirectURI: "https://x/cb", Verifier: verifier, RefreshHash: "r1", RefreshTTL: time.Hour}, now)
	s = s.Evolve(evs[0])
	evs, err := DecideRefresh(s, "c", "r1", "r2", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	s2 := s.Evolve(evs[0])
	if s.RefreshHash != "r1" || len(s.Rotated) != 0 {
		t.Fatal("evolve changed the earlier state")
	}
	if _, err := DecideRefresh(s2, "c", "r1", "r3", time.Hour, now); !errors.Is(err, ErrReplay) {
		t.Fatalf("rotated token: %v", err)
	}
	if _, err := DecideRefresh(s2, "d", "r2", "r3", time.Hour, now); !errors.Is(err, ErrInvalidGrant) {
		t.Fatalf("other client: %v", err)
	}
	if _, err := DecideRefresh(s2, "c", "r2", "r3", time.Hour, now.Add(2*time.Hour)); !errors.Is(err, ErrInvalidGrant) {
		t.Fatalf("expired refresh: %v", err)
	}
	evs, _ = DecideRevoke(s2, ReasonUser, now)
	s3 := s2.Evolve(evs[0])
	if _, err := DecideRefresh(s3, "c", "r2", "r3", time.Hour, now); !errors.Is(err, ErrInvalidGrant) {
		t.Fatalf("revoked: %v", err)
	}
	if evs, _ := DecideRevoke(s3, ReasonUser, now); len(evs) != 0 {
		t.Fatal("second revocation appended")
	}
}
