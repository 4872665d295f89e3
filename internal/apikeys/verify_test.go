package apikeys

import (
	"crypto/ed25519"
	"crypto/rand"
	mrand "math/rand/v2"
	"testing"
)

// Verify and a Verifier agree with crypto/ed25519.Verify on valid signatures and on every kind of damage:
// a flipped bit in the signature, the message or the key, a signature of another key, bytes
// of the wrong length, and the small-order and non-canonical encodings that the two
// libraries' defaults treat differently.
func TestVerifyAgreesWithTheStandardLibrary(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 2))
	agree := func(what string, pub ed25519.PublicKey, msg, sig []byte) {
		t.Helper()
		want := len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, msg, sig)
		if got := Verify(pub, msg, sig); got != want {
			t.Fatalf("%s: Verify = %v, crypto/ed25519 = %v", what, got, want)
		}
		if got := NewVerifier(pub).Verify(msg, sig); got != want {
			t.Fatalf("%s: Verifier = %v, crypto/ed25519 = %v", what, got, want)
		}
	}
	for i := range 300 {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, rng.IntN(300))
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		sig := ed25519.Sign(priv, msg)
		if !Verify(pub, msg, sig) {
			t.Fatalf("a valid signature (%d) refused", i)
		}
		agree("valid", pub, msg, sig)
		agree("flipped signature bit", pub, msg, flip(sig, rng.IntN(len(sig)*8)))
		if len(msg) > 0 {
			agree("flipped message bit", pub, flip(msg, rng.IntN(len(msg)*8)), sig)
		}
		agree("flipped key bit", flip(pub, rng.IntN(len(pub)*8)), msg, sig)
		other, _, _ := ed25519.GenerateKey(rand.Reader)
		agree("another key", other, msg, sig)
		agree("short signature", pub, msg, sig[:63])
		agree("short key", pub[:31], msg, sig)
	}
	// Edge encodings: the identity and small-order points as key and as R, a non-canonical
	// key (y = p), S = 0 and S past the group order.
	identity := make([]byte, 32)
	identity[0] = 1
	order2 := make([]byte, 32) // y = -1
	order2[0] = 0xec
	for i := 1; i < 31; i++ {
		order2[i] = 0xff
	}
	order2[31] = 0x7f
	nonCanonical := make([]byte, 32) // y = p, encodes 0 non-canonically
	nonCanonical[0] = 0xed
	for i := 1; i < 31; i++ {
		nonCanonical[i] = 0xff
	}
	nonCanonical[31] = 0x7f
	big := make([]byte, 32)
	for i := range big {
		big[i] = 0xff
	}
	big[31] = 0x0f
	for _, key := range [][]byte{identity, order2, nonCanonical} {
		for _, r := range [][]byte{identity, order2, nonCanonical} {
			for _, s := range [][]byte{make([]byte, 32), big} {
				sig := append(append([]byte{}, r...), s...)
				agree("edge encoding", key, []byte("msg"), sig)
			}
		}
	}
}

// flip returns a copy of b with bit n flipped.
func flip(b []byte, n int) []byte {
	c := append([]byte{}, b...)
	c[n/8] ^= byte(1) << (n % 8)
	return c
}

// BenchmarkVerify compares Verify and a Verifier with crypto/ed25519.Verify on a request-sized
// message.
func BenchmarkVerify(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := Message("POST", "/v1/sdk/components", "1764201600", make([]byte, 200))
	sig := ed25519.Sign(priv, msg)
	b.Run("curve25519-voi", func(b *testing.B) {
		for b.Loop() {
			if !Verify(pub, msg, sig) {
				b.Fatal("refused")
			}
		}
	})
	v := NewVerifier(pub)
	b.Run("Verifier", func(b *testing.B) {
		for b.Loop() {
			if !v.Verify(msg, sig) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("crypto/ed25519", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("refused")
			}
		}
	})
}
