package apikeys

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math/big"
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

// bigDecode62 is base62 by math/big, as decode62 read it before: the reference it must agree with.
func bigDecode62(s string, size int) ([]byte, error) {
	n := new(big.Int)
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(alphabet, s[i])
		if d < 0 {
			return nil, ErrMalformed
		}
		n.Mul(n, base)
		n.Add(n, big.NewInt(int64(d)))
	}
	if n.BitLen() > size*8 {
		return nil, ErrMalformed
	}
	return n.FillBytes(make([]byte, size)), nil
}

// decode62 reads every string as math/big does: the same bytes, or both refuse it. A key
// parsed differently would name another key's stream (its hash would still refuse it).
func FuzzDecode62AgreesWithBigInt(f *testing.F) {
	for _, s := range []string{"", "0", "z", "zzzzzzzzzzzzzzzzzzzzzz", "7n42DGM5Tflk9n8mt7Fhc7", "7n42DGM5Tflk9n8mt7Fhc8",
		"1vGVwVBZpPZmFSxHqaDIsmfsjMHeqz9ZIVIFdmWXqTI", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "0_0", "é"} {
		f.Add(s, 16)
		f.Add(s, 32)
	}
	f.Fuzz(func(t *testing.T, s string, size int) {
		if size < 0 || size > 64 {
			return
		}
		got, gerr := decode62(s, size)
		want, werr := bigDecode62(s, size)
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("decode62(%q, %d) = %x, %v; math/big: %x, %v", s, size, got, gerr, want, werr)
		}
	})
}

// BenchmarkParseID times what every SDK request pays to find its key's id.
func BenchmarkParseID(b *testing.B) {
	m, err := Mint(uuid.New(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ParseID(m.APIKey); err != nil {
			b.Fatal(err)
		}
	}
}
