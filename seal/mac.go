package seal

import (
	"crypto/hmac"
	"crypto/sha256"
)

// MAC keys sign what the service hands out and must recognise later without storing it (an
// approval's single-use URL). Each is derived from a KEK with HMAC-SHA256 under a fixed label,
// so the KEK itself never signs anything and a MAC reveals nothing of it; a rotated-out key
// still verifies what it signed.

const macLabel = "switchyard/seal/mac/v1"

func deriveMACKey(kek []byte) []byte {
	m := hmac.New(sha256.New, kek)
	m.Write([]byte(macLabel))
	return m.Sum(nil)
}

func mac(key []byte, purpose string, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(msg)
	return m.Sum(nil)
}

// MAC signs msg for purpose (which separates the uses of one key) with the current key.
func (s *Sealer) MAC(purpose string, msg []byte) []byte {
	return mac(s.macKeys[s.currentID], purpose, msg)
}

// VerifyMAC reports whether sum is the MAC of msg for purpose under any of the Sealer's keys,
// comparing in constant time.
func (s *Sealer) VerifyMAC(purpose string, msg, sum []byte) bool {
	ok := false
	for _, kid := range s.ids {
		if hmac.Equal(mac(s.macKeys[kid], purpose, msg), sum) {
			ok = true
		}
	}
	return ok
}
