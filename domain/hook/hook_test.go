package hook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

var hash = strings.Repeat("ab", 32)

func TestHookDecideIssueAndRotate(t *testing.T) {
	issue := Issue{WorkspaceID: "ws1", WorkflowID: "wf1", ComponentID: "hook", Hash: hash, SealedSecret: "sy1.sealed"}
	evs, err := DecideIssue(State{}, issue, now)
	if err != nil {
		t.Fatal(err)
	}
	want := Issued{ID: ID("wf1", "hook"), WorkspaceID: "ws1", WorkflowID: "wf1", ComponentID: "hook", Hash: hash, SealedSecret: "sy1.sealed", IssuedAt: now}
	if !reflect.DeepEqual(evs, []domain.Event{want}) {
		t.Fatalf("events %#v", evs)
	}
	s := State{}.Evolve(want)
	if _, err := DecideIssue(s, issue, now); !errors.Is(err, domain.ErrAlreadyExists) {
		t.Fatalf("issued twice: %v", err)
	}
	for field, c := range map[string]Issue{
		"token":       {WorkspaceID: "ws1", WorkflowID: "wf1", ComponentID: "hook", SealedSecret: "x"},
		"secret":      {WorkspaceID: "ws1", WorkflowID: "wf1", ComponentID: "hook", Hash: hash},
		"componentId": {WorkspaceID: "ws1", WorkflowID: "wf1", Hash: hash, SealedSecret: "x"},
	} {
		var ve *domain.ValidationError
		if _, err := DecideIssue(State{}, c, now); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("issue without %s: %v", field, err)
		}
	}
	other := strings.Repeat("cd", 32)
	evs, err = DecideRotate(s, "ws1", other, "sy1.other", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	s = s.Evolve(evs[0])
	if s.Hash != other || s.SealedSecret != "sy1.other" || s.RotatedAt == nil || !s.RotatedAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("rotated state %+v", s)
	}
	if _, err := DecideRotate(s, "ws2", other, "x", now); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("rotation from another workspace: %v", err)
	}
	if _, err := DecideRotate(State{}, "ws1", other, "x", now); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("rotation of no hook: %v", err)
	}
}

func TestHookTokenShape(t *testing.T) {
	id := ID("wf1", "hook")
	if id == ID("wf1", "hook2") || id == ID("wf2", "hook") || id != ID("wf1", "hook") {
		t.Fatal("hook ids must be one per workflow and component")
	}
	token := Format(id, make([]byte, RandomBytes))
	got, err := ParseID(token)
	if err != nil || got != id || len(token) != Length {
		t.Fatalf("ParseID(%q) = %q, %v", token, got, err)
	}
	for _, bad := range []string{"", token[:len(token)-1], strings.ToUpper(token), "mcp_" + token[4:], token[:len(token)-1] + "g"} {
		if _, err := ParseID(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseID(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func headers(kv ...string) func(string) string {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h.Get
}

func TestHookVerify(t *testing.T) {
	body := []byte(`{"a":1}`)
	secret := NewSecret([]byte("0123456789abcdef0123456789abcdef"))
	key, _ := StandardKey(secret)
	ts := strconv.FormatInt(now.Unix(), 10)
	stdSig := SignStandard(key, "msg_1", ts, body)
	iso := now.Format(time.RFC3339Nano)
	v1Sig := SignV1(secret, iso, body)
	ghSig := SignGitHub(secret, body)
	bodySum := sha256.Sum256(body)
	cases := []struct {
		name   string
		scheme string
		header func(string) string
		at     time.Time
		id     string // "" when refused
	}{
		{"standard", workflow.SchemeStandardWebhooks, headers("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", stdSig), now, "msg_1"},
		{"standard, one of several signatures", workflow.SchemeStandardWebhooks, headers("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", "v1,AAAA "+stdSig), now, "msg_1"},
		{"standard, 5 minutes late", workflow.SchemeStandardWebhooks, headers("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", stdSig), now.Add(Tolerance), "msg_1"},
		{"standard, too late", workflow.SchemeStandardWebhooks, headers("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", stdSig), now.Add(Tolerance + time.Second), ""},
		{"standard, too early", workflow.SchemeStandardWebhooks, headers("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", stdSig), now.Add(-Tolerance - time.Second), ""},
		{"standard, another id", workflow.SchemeStandardWebhooks, headers("webhook-id", "msg_2", "webhook-timestamp", ts, "webhook-signature", stdSig), now, ""},
		{"standard, timestamp not seconds", workflow.SchemeStandardWebhooks, headers("webhook-id", "msg_1", "webhook-timestamp", iso, "webhook-signature", stdSig), now, ""},
		{"standard, no signature", workflow.SchemeStandardWebhooks, headers("webhook-id", "msg_1", "webhook-timestamp", ts), now, ""},
		{"v1", workflow.SchemeHMACSHA256V1, headers("x-signature-version", "v1", "x-signature-timestamp", iso, "x-signature", v1Sig, "x-delivery-id", "e:1"), now, "e:1"},
		{"v1 without a delivery id", workflow.SchemeHMACSHA256V1, headers("x-signature-version", "v1", "x-signature-timestamp", iso, "x-signature", v1Sig), now, "sha256:" + hex.EncodeToString(bodySum[:])},
		{"v1, version 2", workflow.SchemeHMACSHA256V1, headers("x-signature-version", "v2", "x-signature-timestamp", iso, "x-signature", v1Sig), now, ""},
		{"v1, stale", workflow.SchemeHMACSHA256V1, headers("x-signature-version", "v1", "x-signature-timestamp", iso, "x-signature", v1Sig), now.Add(time.Hour), ""},
		{"v1, uppercase hex", workflow.SchemeHMACSHA256V1, headers("x-signature-version", "v1", "x-signature-timestamp", iso, "x-signature", "sha256="+strings.ToUpper(v1Sig[7:])), now, ""},
		{"github", workflow.SchemeGitHub, headers("X-Hub-Signature-256", ghSig, "X-GitHub-Delivery", "gh-1"), now, "gh-1"},
		{"github, no signature", workflow.SchemeGitHub, headers("X-GitHub-Delivery", "gh-1"), now, ""},
		{"github, sha1 only", workflow.SchemeGitHub, headers("X-Hub-Signature", "sha1=00", "X-GitHub-Delivery", "gh-1"), now, ""},
		{"unknown scheme", "stripe", headers("X-Hub-Signature-256", ghSig), now, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := Verify(tc.scheme, secret, Signed{Header: tc.header, Body: body}, tc.at)
			if tc.id == "" {
				if !errors.Is(err, ErrSignature) {
					t.Fatalf("Verify = %q, %v; want ErrSignature", id, err)
				}
				return
			}
			if err != nil || id != tc.id {
				t.Fatalf("Verify = %q, %v; want %q", id, err, tc.id)
			}
		})
	}
}

// The signatures are the published ones: Standard Webhooks' test vector, and GitHub's
// documented example.
func TestHookSignaturesMatchPublishedVectors(t *testing.T) {
	// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
	key, err := StandardKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := SignStandard(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("standard webhooks: %s, want %s", got, want)
	}
	// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
	if got, want := SignGitHub("It's a Secret to Everybody", []byte("Hello, World!")), "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Errorf("github: %s, want %s", got, want)
	}
	// SPEC.md 6.1: HMAC-SHA256 of timestamp + "." + body, lowercase hex after sha256=.
	m := hmac.New(sha256.New, []byte("s"))
	m.Write([]byte("2026-11-26T12:00:00.000Z.{}"))
	if got, want := SignV1("s", "2026-11-26T12:00:00.000Z", []byte("{}")), "sha256="+hex.EncodeToString(m.Sum(nil)); got != want {
		t.Errorf("v1: %s, want %s", got, want)
	}
}

func TestHookCheckSecret(t *testing.T) {
	good := "whsec_" + base64.StdEncoding.EncodeToString([]byte("sixteen bytes at least"))
	for _, tc := range []struct {
		scheme, secret string
		ok             bool
	}{
		{workflow.SchemeStandardWebhooks, good, true},
		{workflow.SchemeStandardWebhooks, "not base64 but long enough", false},
		{workflow.SchemeGitHub, "not base64 but long enough", true},
		{workflow.SchemeGitHub, "short", false},
		{workflow.SchemeHMACSHA256V1, strings.Repeat("x", MaxSecretLength+1), false},
		{workflow.SchemeHMACSHA256V1, "two\nlines of a secret", false},
	} {
		err := CheckSecret(tc.scheme, tc.secret)
		var ve *domain.ValidationError
		if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &ve) || ve.Field != "secret")) {
			t.Errorf("CheckSecret(%s, %q) = %v", tc.scheme, tc.secret, err)
		}
	}
}
