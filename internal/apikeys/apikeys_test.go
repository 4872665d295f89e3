package apikeys

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestMintAndParse(t *testing.T) {
	for i := 0; i < 50; i++ {
		id := uuid.New()
		m, err := Mint(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.APIKey) != Length || !strings.HasPrefix(m.APIKey, "ws_") {
			t.Fatalf("apiKey %q: length %d", m.APIKey, len(m.APIKey))
		}
		got, err := ParseID(m.APIKey)
		if err != nil || got != id.String() {
			t.Fatalf("ParseID(%q) = %q, %v; want %s", m.APIKey, got, err, id)
		}
		if m.KeyHash != Hash(m.APIKey) || len(m.KeyHash) != 64 {
			t.Fatalf("hash %q", m.KeyHash)
		}
		priv, err := ParseSecret(m.APISecret)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := ParsePublicKey(m.PublicKey)
		if err != nil || !bytes.Equal(pub, priv.Public().(ed25519.PublicKey)) {
			t.Fatalf("public key %v does not match the secret", err)
		}
		sig, _ := base64.StdEncoding.DecodeString(Sign(priv, "GET", "/v1/x?a=1", "17", nil))
		if !ed25519.Verify(pub, []byte("GET|/v1/x?a=1|17|"), sig) {
			t.Fatal("signature does not verify over the documented message")
		}
	}
}

func TestExtremeIDsRoundTrip(t *testing.T) {
	for _, id := range []uuid.UUID{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		key := Format(id, bytes.Repeat([]byte{0xff}, 32))
		got, err := ParseID(key)
		if err != nil || got != id.String() {
			t.Fatalf("%s: %q %v", id, got, err)
		}
	}
}

func TestParseIDRejectsMalformedKeys(t *testing.T) {
	good := Format(uuid.New(), make([]byte, 32))
	for name, key := range map[string]string{
		"empty":          "",
		"no prefix":      "xx" + good[2:],
		"short":          good[:len(good)-1],
		"long":           good + "0",
		"bad separator":  good[:25] + "-" + good[26:],
		"bad digit":      good[:10] + "!" + good[11:],
		"id overflows":   "ws_zzzzzzzzzzzzzzzzzzzzzz" + good[25:],
		"random too big": good[:26] + strings.Repeat("z", 43),
	} {
		if _, err := ParseID(key); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := ParseSecret("not base64!"); !errors.Is(err, ErrMalformed) {
		t.Errorf("secret: %v", err)
	}
}
