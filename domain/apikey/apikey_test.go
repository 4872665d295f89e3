package apikey

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func fold(events ...domain.Event) State {
	var s State
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

func ptr(t time.Time) *time.Time { return &t }

func validCreate() Create {
	return Create{ID: "k1", WorkspaceID: "ws1", KeyHash: "ab12", PublicKey: "cHVi", Label: " CI "}
}

var created = Created{ID: "k1", WorkspaceID: "ws1", KeyHash: "ab12", PublicKey: "cHVi", Label: "CI",
	AllowedWorkflowIDs: []string{}, At: now}

func TestDecideCreate(t *testing.T) {
	cases := []struct {
		name    string
		given   []domain.Event
		when    func(c *Create)
		then    []domain.Event
		wantErr error
		field   string
	}{
		{name: "minimal key", when: func(*Create) {}, then: []domain.Event{created}},
		{name: "allowed workflows trimmed and deduplicated", when: func(c *Create) {
			c.AllowedWorkflowIDs = []string{"wf-b", " wf-a ", "wf-b", "wf-a"}
		}, then: []domain.Event{func() Created { e := created; e.AllowedWorkflowIDs = []string{"wf-b", "wf-a"}; return e }()}},
		{name: "expiry kept in UTC", when: func(c *Create) {
			c.ExpiresAt = ptr(now.Add(time.Hour).In(time.FixedZone("x", 3600)))
		}, then: []domain.Event{func() Created { e := created; e.ExpiresAt = ptr(now.Add(time.Hour)); return e }()}},
		{name: "label of 200 characters", when: func(c *Create) { c.Label = strings.Repeat("é", 200) },
			then: []domain.Event{func() Created { e := created; e.Label = strings.Repeat("é", 200); return e }()}},
		{name: "100 workflows after deduplication", when: func(c *Create) {
			for i := 0; i < 100; i++ {
				c.AllowedWorkflowIDs = append(c.AllowedWorkflowIDs, string(rune('a'+i%26))+strings.Repeat("x", i/26))
			}
			c.AllowedWorkflowIDs = append(c.AllowedWorkflowIDs, "a")
		}, then: nil /* checked by count below */},
		{name: "already exists", given: []domain.Event{created}, when: func(*Create) {}, wantErr: domain.ErrAlreadyExists},
		{name: "label too long", when: func(c *Create) { c.Label = strings.Repeat("a", 201) }, wantErr: domain.ErrInvalid, field: "label"},
		{name: "empty workflow id", when: func(c *Create) { c.AllowedWorkflowIDs = []string{"wf", " "} }, wantErr: domain.ErrInvalid, field: "allowedWorkflowIds"},
		{name: "too many workflows", when: func(c *Create) {
			for i := 0; i < 101; i++ {
				c.AllowedWorkflowIDs = append(c.AllowedWorkflowIDs, strings.Repeat("w", i+1))
			}
		}, wantErr: domain.ErrInvalid, field: "allowedWorkflowIds"},
		{name: "expiry now", when: func(c *Create) { c.ExpiresAt = ptr(now) }, wantErr: domain.ErrInvalid, field: "expiresAt"},
		{name: "expiry in the past", when: func(c *Create) { c.ExpiresAt = ptr(now.Add(-time.Second)) }, wantErr: domain.ErrInvalid, field: "expiresAt"},
		{name: "no workspace", when: func(c *Create) { c.WorkspaceID = "" }, wantErr: domain.ErrInvalid, field: "workspaceId"},
		{name: "no key material", when: func(c *Create) { c.PublicKey = "" }, wantErr: domain.ErrInvalid, field: "apiKey"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validCreate()
			tc.when(&c)
			evs, err := DecideCreate(fold(tc.given...), c, now)
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
			if tc.then == nil {
				if n := len(evs[0].(Created).AllowedWorkflowIDs); n != 100 {
					t.Fatalf("%d allowed workflows, want 100", n)
				}
				return
			}
			if !reflect.DeepEqual(evs, tc.then) {
				t.Fatalf("events\n got %#v\nwant %#v", evs, tc.then)
			}
		})
	}
}

func TestAllowedWorkflowIDsSerialiseAsArray(t *testing.T) {
	evs, err := DecideCreate(State{}, validCreate(), now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(evs[0])
	if !strings.Contains(string(b), `"allowedWorkflowIds":[]`) || !strings.Contains(string(b), `"expiresAt":null`) {
		t.Fatalf("encoded %s", b)
	}
	// An event written without the field still folds to an empty list, never nil.
	dec, err := domain.Events.Decode("ApiKeyCreated", []byte(`{"id":"k","workspaceId":"w","keyHash":"h","publicKey":"p"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := fold(dec); s.AllowedWorkflowIDs == nil {
		t.Fatal("nil allowed workflows after folding")
	}
}

func TestDecideRevoke(t *testing.T) {
	revoked := Revoked{ID: "k1", WorkspaceID: "ws1", At: now, Reason: "leaked"}
	cases := []struct {
		name    string
		given   []domain.Event
		reason  string
		then    []domain.Event
		wantErr error
	}{
		{name: "revoke", given: []domain.Event{created}, reason: " leaked ", then: []domain.Event{revoked}},
		{name: "twice is a no-op", given: []domain.Event{created, revoked}, reason: "again", then: nil},
		{name: "unknown key", reason: "x", wantErr: domain.ErrNotFound},
		{name: "reason too long", given: []domain.Event{created}, reason: strings.Repeat("r", 501), wantErr: domain.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := DecideRevoke(fold(tc.given...), tc.reason, now)
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

func TestUsable(t *testing.T) {
	exp := created
	exp.ExpiresAt = ptr(now.Add(time.Minute))
	cases := []struct {
		name  string
		given []domain.Event
		at    time.Time
		want  bool
	}{
		{"missing", nil, now, false},
		{"fresh", []domain.Event{created}, now, true},
		{"before expiry", []domain.Event{exp}, now.Add(59 * time.Second), true},
		{"at expiry", []domain.Event{exp}, now.Add(time.Minute), false},
		{"revoked", []domain.Event{created, Revoked{ID: "k1", At: now}}, now, false},
	}
	for _, c := range cases {
		s := fold(c.given...)
		if got := s.Usable(c.at); got != c.want {
			t.Errorf("%s: usable %v, want %v", c.name, got, c.want)
		}
	}
	s := fold(created, Revoked{ID: "k1", At: now, Reason: "r"})
	if !s.Revoked || s.RevokedAt == nil || !s.RevokedAt.Equal(now) || s.RevokeReason != "r" || s.Label != "CI" {
		t.Fatalf("state after revoke %+v", s)
	}
}
