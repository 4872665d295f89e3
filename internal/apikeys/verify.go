package apikeys

import (
	"crypto/ed25519"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// stdLibSemantics verifies exactly what crypto/ed25519.Verify accepts (voi's preset for it),
// so that which signatures pass does not depend on the library.
var stdLibSemantics = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// Verify reports whether sig is pub's Ed25519 signature of msg, accepting exactly what
// crypto/ed25519.Verify accepts. Every SDK request is verified, and crypto/ed25519's
// verification was a fifth of the service's CPU in `bench e2e`; curve25519-voi's takes less
// than half the time (BenchmarkVerify). A key of the wrong size is refused, not a panic.
func Verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	return voi.VerifyWithOptions(voi.PublicKey(pub), msg, sig, stdLibSemantics)
}

// Verifier checks signatures of one key. The key's point is decoded and its multiples table
// built once, which takes about an eighth off each check (BenchmarkVerify): the service keeps
// one per cached API key, and every SDK request is checked. It accepts exactly what Verify
// accepts for the same key.
type Verifier struct {
	pub ed25519.PublicKey
	exp *voi.ExpandedPublicKey // nil when pub is not a point: Verify then refuses every signature
}

// NewVerifier prepares pub for repeated checks.
func NewVerifier(pub ed25519.PublicKey) Verifier {
	v := Verifier{pub: pub}
	if len(pub) == ed25519.PublicKeySize {
		v.exp, _ = voi.NewExpandedPublicKey(voi.PublicKey(pub))
	}
	return v
}

// Verify reports whether sig is the key's signature of msg.
func (v Verifier) Verify(msg, sig []byte) bool {
	if v.exp == nil {
		return Verify(v.pub, msg, sig)
	}
	return voi.VerifyExpandedWithOptions(v.exp, msg, sig, stdLibSemantics)
}
