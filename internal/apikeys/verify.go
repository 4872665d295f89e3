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
