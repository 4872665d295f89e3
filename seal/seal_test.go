package seal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func mustKey(t *testing.T) []byte {
	t.Helper()
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func mustSealer(t *testing.T, current []byte, previous ...[]byte) *Sealer {
	t.Helper()
	s, err := New(current, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	s := mustSealer(t, mustKey(t))
	for _, tc := range []struct {
		name      string
		plaintext []byte
		ad        []byte
	}{
		{"secret with context", []byte("whsec_0123456789"), []byte("execution-1/callbackSecret")},
		{"no associated data", []byte("hunter2"), nil},
		{"empty plaintext", []byte{}, []byte("x")},
		{"binary", []byte{0, 1, 2, 255, '.', '"', '\n'}, []byte{0}},
		{"large", bytes.Repeat([]byte("a"), 1<<20), []byte("big")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sealed, err := s.Seal(tc.plaintext, tc.ad)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(sealed, Version+"."+s.KeyID()+".") {
				t.Fatalf("sealed value %.40q does not start with version and key id", sealed)
			}
			if len(tc.plaintext) >= 4 && strings.Contains(sealed, string(tc.plaintext)) {
				t.Fatal("sealed value contains the plaintext")
			}
			// Safe in JSON: survives a round trip through encoding/json unchanged and unescaped.
			js, _ := json.Marshal(sealed)
			if string(js) != `"`+sealed+`"` {
				t.Fatalf("sealed value needs escaping in JSON: %.60s", js)
			}
			got, err := s.Open(sealed, tc.ad)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.plaintext) {
				t.Fatalf("Open = %.20q, want %.20q", got, tc.plaintext)
			}
		})
	}
}

func TestFreshDataKeyPerSeal(t *testing.T) {
	s := mustSealer(t, mustKey(t))
	a, _ := s.Seal([]byte("same"), nil)
	b, _ := s.Seal([]byte("same"), nil)
	if a == b {
		t.Fatal("sealing the same plaintext twice gave the same value")
	}
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if pa[2] == pb[2] {
		t.Fatal("two seals share a wrapped data key")
	}
}

func TestTamperDetection(t *testing.T) {
	s := mustSealer(t, mustKey(t))
	ad := []byte("execution-42/callbackSecret")
	sealed, err := s.Seal([]byte("the secret"), ad)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(sealed, ".")

	flip := func(part int, at int) string {
		p := append([]string(nil), parts...)
		raw, err := b64.DecodeString(p[part])
		if err != nil {
			t.Fatal(err)
		}
		raw[at] ^= 0x01
		p[part] = b64.EncodeToString(raw)
		return strings.Join(p, ".")
	}
	other := mustSealer(t, mustKey(t))
	otherSealed, _ := other.Seal([]byte("other"), ad)
	otherParts := strings.Split(otherSealed, ".")

	for _, tc := range []struct {
		name   string
		sealed string
		ad     []byte
		want   error
	}{
		{"ciphertext bit flipped", flip(3, len(mustDecode(t, parts[3]))/2), ad, ErrAuthentication},
		{"ciphertext tag flipped", flip(3, len(mustDecode(t, parts[3]))-1), ad, ErrAuthentication},
		{"data nonce flipped", flip(3, 0), ad, ErrAuthentication},
		{"wrapped key flipped", flip(2, 20), ad, ErrAuthentication},
		{"different associated data", sealed, []byte("execution-43/callbackSecret"), ErrAuthentication},
		{"missing associated data", sealed, nil, ErrAuthentication},
		{"associated data with suffix", sealed, append(append([]byte(nil), ad...), 'x'), ErrAuthentication},
		{"ciphertext truncated", strings.Join([]string{parts[0], parts[1], parts[2], parts[3][:10]}, "."), ad, ErrMalformed},
		{"wrapped key from another value", strings.Join([]string{parts[0], parts[1], otherParts[2], parts[3]}, "."), ad, ErrAuthentication},
		{"ciphertext from another value", strings.Join([]string{parts[0], parts[1], parts[2], otherParts[3]}, "."), ad, ErrAuthentication},
		{"wrong version", "sy0" + strings.TrimPrefix(sealed, Version), ad, ErrMalformed},
		{"missing part", strings.Join(parts[:3], "."), ad, ErrMalformed},
		{"extra part", sealed + ".x", ad, ErrMalformed},
		{"not base64", strings.Join([]string{parts[0], parts[1], parts[2], "!!!"}, "."), ad, ErrMalformed},
		{"empty", "", ad, ErrMalformed},
		{"plain text", "hunter2", ad, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Open(tc.sealed, tc.ad)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %q, %v; want error %v", got, err, tc.want)
			}
			if got != nil {
				t.Fatalf("Open returned plaintext %q with an error", got)
			}
		})
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := b64.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWrongKey(t *testing.T) {
	a := mustSealer(t, mustKey(t))
	b := mustSealer(t, mustKey(t))
	sealed, err := a.Seal([]byte("secret"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(sealed, nil); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Open with another key: %v, want ErrUnknownKey", err)
	}
	if err := fmt.Sprint(func() error { _, err := b.Open(sealed, nil); return err }()); !strings.Contains(err, a.KeyID()) {
		t.Fatalf("unknown-key error %q does not name the key id %s", err, a.KeyID())
	}

	// A different key that claims the same key id (forged kid) must still fail authentication.
	parts := strings.Split(sealed, ".")
	parts[1] = b.KeyID()
	if _, err := b.Open(strings.Join(parts, "."), nil); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("Open with a forged key id: %v, want ErrAuthentication", err)
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey := mustKey(t), mustKey(t)
	before := mustSealer(t, oldKey)
	sealedOld, err := before.Seal([]byte("sealed before rotation"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}

	after := mustSealer(t, newKey, oldKey)
	if after.KeyID() != KeyID(newKey) {
		t.Fatalf("current key id %s, want the new key's %s", after.KeyID(), KeyID(newKey))
	}
	if ids := after.KeyIDs(); len(ids) != 2 || ids[0] != KeyID(newKey) || ids[1] != KeyID(oldKey) {
		t.Fatalf("KeyIDs = %v", ids)
	}
	got, err := after.Open(sealedOld, []byte("ad"))
	if err != nil || string(got) != "sealed before rotation" {
		t.Fatalf("open old value after rotation: %q, %v", got, err)
	}
	sealedNew, err := after.Seal([]byte("sealed after rotation"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if kid, _ := SealedWith(sealedNew); kid != KeyID(newKey) {
		t.Fatalf("new value sealed with %s, want the current key %s", kid, KeyID(newKey))
	}
	if kid, _ := SealedWith(sealedOld); kid != KeyID(oldKey) {
		t.Fatalf("SealedWith(old) = %s, want %s", kid, KeyID(oldKey))
	}
	// Once the old key is dropped, values sealed under it no longer open.
	if _, err := before.Open(sealedNew, nil); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old sealer opened a value sealed with the new key: %v", err)
	}
	if _, err := mustSealer(t, newKey).Open(sealedOld, []byte("ad")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("open after dropping the old key: %v, want ErrUnknownKey", err)
	}
}

func TestNewValidatesKeys(t *testing.T) {
	k := mustKey(t)
	if _, err := New(k[:16]); err == nil || !strings.Contains(err.Error(), "current key is 16 bytes") {
		t.Fatalf("short current key: %v", err)
	}
	if _, err := New(k, mustKey(t), make([]byte, 31)); err == nil || !strings.Contains(err.Error(), "previous key 2") {
		t.Fatalf("short previous key: %v", err)
	}
	if _, err := New(nil); err == nil {
		t.Fatal("nil key accepted")
	}
	s, err := New(k, k)
	if err != nil {
		t.Fatalf("same key twice: %v", err)
	}
	if len(s.KeyIDs()) != 1 {
		t.Fatalf("duplicate key kept twice: %v", s.KeyIDs())
	}
}

func TestSealerNeverPrintsKeys(t *testing.T) {
	k := mustKey(t)
	s := mustSealer(t, k)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, s)
		if strings.Contains(out, EncodeKey(k)) || strings.Contains(out, fmt.Sprint(k)) || !strings.Contains(out, s.KeyID()) {
			t.Fatalf("%s of a Sealer = %q", format, out)
		}
	}
}

func TestKeyIDAndIsSealed(t *testing.T) {
	k := make([]byte, KeySize)
	// SHA-256 of 32 zero bytes is 66687aad...
	if got := KeyID(k); got != "66687aad" {
		t.Fatalf("KeyID(zero key) = %s", got)
	}
	s := mustSealer(t, mustKey(t))
	v, _ := s.Seal([]byte("x"), nil)
	if !IsSealed(v) || IsSealed("x") || IsSealed("sy1.abc.d.e") {
		t.Fatal("IsSealed misclassifies")
	}
}

func TestDecodeKey(t *testing.T) {
	k := mustKey(t)
	for _, tc := range []struct {
		name, text string
		ok         bool
	}{
		{"standard", EncodeKey(k), true},
		{"with newline and spaces", "  " + EncodeKey(k) + "\n", true},
		{"unpadded", strings.TrimRight(EncodeKey(k), "="), true},
		{"url alphabet", b64.EncodeToString(k), true},
		{"empty", "", false},
		{"blank", "   ", false},
		{"16 bytes", EncodeKey(k[:16]), false},
		{"64 bytes", EncodeKey(append(k, k...)), false},
		{"not base64", "this is not base64 at all!!", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeKey(tc.text)
			if tc.ok {
				if err != nil || !bytes.Equal(got, k) {
					t.Fatalf("DecodeKey = %v, %v", got, err)
				}
				return
			}
			if err == nil {
				t.Fatal("DecodeKey accepted a bad key")
			}
			if tc.text != "" && strings.TrimSpace(tc.text) != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.text)) {
				t.Fatalf("error repeats the key text: %v", err)
			}
		})
	}
}

func BenchmarkSeal(b *testing.B) {
	s, _ := New(make([]byte, KeySize))
	pt := []byte("a typical webhook secret of forty bytes!")
	for b.Loop() {
		if _, err := s.Seal(pt, []byte("ad")); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	s, _ := New(make([]byte, KeySize))
	v, _ := s.Seal([]byte("a typical webhook secret of forty bytes!"), []byte("ad"))
	for b.Loop() {
		if _, err := s.Open(v, []byte("ad")); err != nil {
			b.Fatal(err)
		}
	}
}
