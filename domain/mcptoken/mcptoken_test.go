package mcptoken

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const tokenID = "0b8f5c1e-3d2a-4c6b-9e7f-1a2b3c4d5e6f"

var hash = strings.Repeat("ab", 32)

func fold(events ...domain.Event) State {
	var s State
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

func ptr(t time.Time) *time.Time { return &t }

var minted = Minted{ID: tokenID, WorkspaceID: "ws1", Label: "claude", Hash: hash, CreatedAt: now}

func TestMCPTokenDecideMint(t *testing.T) {
	cases := []struct {
		name    string
		given   []domain.Event
		when    func(c *Mint)
		then    []domain.Event
		wantErr error
		field   string
	}{
		{name: "minimal token", when: func(*Mint) {}, then: []domain.Event{minted}},
		{name: "expiry kept in UTC", when: func(c *Mint) { c.ExpiresAt = ptr(now.Add(time.Hour).In(time.FixedZone("x", 3600))) },
			then: []domain.Event{func() Minted { e := minted; e.ExpiresAt = ptr(now.Add(time.Hour)); return e }()}},
		{name: "label of 200 characters", when: func(c *Mint) { c.Label = strings.Repeat("é", 200) },
			then: []domain.Event{func() Minted { e := minted; e.Label = strings.Repeat("é", 200); return e }()}},
		{name: "empty label", when: func(c *Mint) { c.Label = "  " },
			then: []domain.Event{func() Minted { e := minted; e.Label = ""; return e }()}},
		{name: "already minted", given: []domain.Event{minted}, when: func(*Mint) {}, wantErr: domain.ErrAlreadyExists},
		{name: "label too long", when: func(c *Mint) { c.Label = strings.Repeat("a", 201) }, wantErr: domain.ErrInvalid, field: "label"},
		{name: "label not UTF-8", when: func(c *Mint) { c.Label = "\xff" }, wantErr: domain.ErrInvalid, field: "label"},
		{name: "expiry now", when: func(c *Mint) { c.ExpiresAt = ptr(now) }, wantErr: domain.ErrInvalid, field: "expiresAt"},
		{name: "expiry in the past", when: func(c *Mint) { c.ExpiresAt = ptr(now.Add(-time.Second)) }, wantErr: domain.ErrInvalid, field: "expiresAt"},
		{name: "no workspace", when: func(c *Mint) { c.WorkspaceID = "" }, wantErr: domain.ErrInvalid, field: "workspaceId"},
		{name: "id not a UUID", when: func(c *Mint) { c.ID = "k1" }, wantErr: domain.ErrInvalid, field: "id"},
		{name: "no hash", when: func(c *Mint) { c.Hash = "" }, wantErr: domain.ErrInvalid, field: "token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Mint{ID: tokenID, WorkspaceID: "ws1", Label: " claude ", Hash: hash}
			tc.when(&c)
			evs, err := DecideMint(fold(tc.given...), c, now)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				var ve *domain.ValidationError
				if tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field) {
					t.Fatalf("err %v, want a validation error on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(evs, tc.then) {
				t.Fatalf("events\n got %#v\nwant %#v", evs, tc.then)
			}
		})
	}
}

func TestMCPTokenDecideRevoke(t *testing.T) {
	revoked := Revoked{ID: tokenID, WorkspaceID: "ws1", RevokedAt: now, Reason: "leaked"}
	cases := []struct {
		name      string
		given     []domain.Event
		workspace string
		reason    string
		then      []domain.Event
		wantErr   error
	}{
		{name: "revokes", given: []domain.Event{minted}, workspace: "ws1", reason: " leaked ", then: []domain.Event{revoked}},
		{name: "twice is a no-op", given: []domain.Event{minted, revoked}, workspace: "ws1", reason: "again", then: nil},
		{name: "unknown token", workspace: "ws1", wantErr: domain.ErrNotFound},
		{name: "another workspace's token", given: []domain.Event{minted}, workspace: "ws2", wantErr: domain.ErrNotFound},
		{name: "reason too long", given: []domain.Event{minted}, workspace: "ws1", reason: strings.Repeat("r", 501), wantErr: domain.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := DecideRevoke(fold(tc.given...), tc.workspace, tc.reason, now)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(evs, tc.then) {
				t.Fatalf("events %#v err %v, want %#v", evs, err, tc.then)
			}
		})
	}
}

func TestMCPTokenUsable(t *testing.T) {
	exp := minted
	exp.ExpiresAt = ptr(now.Add(time.Minute))
	cases := []struct {
		name  string
		given []domain.Event
		at    time.Time
		want  bool
	}{
		{"missing", nil, now, false},
		{"fresh", []domain.Event{minted}, now, true},
		{"before expiry", []domain.Event{exp}, now.Add(59 * time.Second), true},
		{"at expiry", []domain.Event{exp}, now.Add(time.Minute), false},
		{"after expiry", []domain.Event{exp}, now.Add(time.Hour), false},
		{"revoked", []domain.Event{minted, Revoked{ID: tokenID, RevokedAt: now}}, now, false},
	}
	for _, c := range cases {
		if got := fold(c.given...).Usable(c.at); got != c.want {
			t.Errorf("%s: usable %v, want %v", c.name, got, c.want)
		}
	}
	// The first revocation is the one that counts.
	s := fold(minted, Revoked{ID: tokenID, RevokedAt: now}, Revoked{ID: tokenID, RevokedAt: now.Add(time.Hour)})
	if !s.Revoked || s.RevokedAt == nil || !s.RevokedAt.Equal(now) || s.Label != "claude" || s.Hash != hash {
		t.Fatalf("state after revoke %+v", s)
	}
}

func TestMCPTokenEventsRoundTrip(t *testing.T) {
	for _, e := range []domain.Event{func() Minted { m := minted; m.ExpiresAt = ptr(now.Add(time.Hour)); return m }(),
		Revoked{ID: tokenID, WorkspaceID: "ws1", RevokedAt: now, Reason: "r"}} {
		b, err := domain.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := domain.Events.Decode(e.EventType(), b)
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("%s: decoded %#v err %v, want %#v", e.EventType(), back, err, e)
		}
	}
	b, _ := domain.Encode(minted)
	for _, f := range []string{`"id"`, `"workspaceId"`, `"label"`, `"hash"`, `"createdAt"`, `"expiresAt":null`} {
		if !strings.Contains(string(b), f) {
			t.Fatalf("MCPTokenMinted %s lacks %s", b, f)
		}
	}
}

func TestMCPTokenFormat(t *testing.T) {
	id := uuid.MustParse(tokenID)
	tok := Format(id, bytes.Repeat([]byte{0xab}, RandomBytes))
	if len(tok) != Length || !strings.HasPrefix(tok, "mcp_"+tokenID+"_") {
		t.Fatalf("token %q", tok)
	}
	got, err := ParseID(tok)
	if err != nil || got != tokenID {
		t.Fatalf("ParseID = %q, %v", got, err)
	}
	if Hash(tok) == Hash(tok[:len(tok)-1]+"c") || len(Hash(tok)) != 64 {
		t.Fatal("hash does not depend on the whole token")
	}
	bad := []string{
		"",
		tok[:len(tok)-1],
		tok + "0",
		"ws_" + tok[3:],
		strings.Replace(tok, tokenID, strings.ToUpper(tokenID), 1),
		strings.Replace(tok, tokenID, "zb8f5c1e-3d2a-4c6b-9e7f-1a2b3c4d5e6f", 1),
		tok[:len(tok)-1] + "g",
		tok[:len(Prefix)+36] + "-" + tok[len(Prefix)+37:],
	}
	for _, b := range bad {
		if _, err := ParseID(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseID(%q) = %v, want ErrMalformed", b, err)
		}
	}
}
