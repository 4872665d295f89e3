// Package seal keeps secrets out of events in the clear (DESIGN.md section 3) with AES-256-GCM
// envelope encryption.
//
// Every sealed secret gets its own random 256-bit data key. The secret is encrypted with the data
// key, and the data key is encrypted ("wrapped") with a key-encryption key (KEK) from
// configuration (SWITCHYARD_SECRET_KEY). The result is one printable, JSON-safe string:
//
//	sy1.<kid>.<wrapped data key>.<ciphertext>
//
// "sy1" is the format version; kid is the first 8 hex digits of SHA-256 of the KEK that wrapped
// the data key; the last two parts are unpadded base64url of nonce||AES-GCM output. The version,
// kid and wrapped key are authenticated together with the caller's associated data, so no part
// can be swapped for another without Open failing.
//
// A Sealer holds one current KEK (used to seal) and any number of previous KEKs (used only to
// open), so a key rotation never rewrites the immutable event log: old events still open with
// the old key, new events are sealed with the new one.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the size in bytes of a key-encryption key and of every data key (AES-256).
const KeySize = 32

// Version is the prefix of every string Seal returns.
const Version = "sy1"

const (
	kidLen   = 8 // hex digits of SHA-256(KEK)
	nonceLen = 12
)

var b64 = base64.RawURLEncoding

// Errors Open returns; test with errors.Is.
var (
	// ErrMalformed: the string is not something Seal produced (wrong version, shape or encoding).
	ErrMalformed = errors.New("seal: malformed sealed value")
	// ErrUnknownKey: the value was sealed under a key this Sealer does not hold.
	ErrUnknownKey = errors.New("seal: sealed under an unknown key")
	// ErrAuthentication: the value was tampered with, or the associated data differs from the
	// associated data it was sealed with.
	ErrAuthentication = errors.New("seal: message authentication failed")
)

// Sealer seals with its current key and opens with any of its keys. It is safe for concurrent use.
type Sealer struct {
	currentID string
	ids       []string               // every kid, the current one first
	keys      map[string]cipher.AEAD // by kid
	macKeys   map[string][]byte      // by kid: the MAC keys derived from each KEK (mac.go)
}

// New returns a Sealer that seals with current and opens values sealed under current or any of
// previous. Every key must be KeySize bytes. The Sealer keeps no reference to the slices.
func New(current []byte, previous ...[]byte) (*Sealer, error) {
	s := &Sealer{keys: make(map[string]cipher.AEAD, 1+len(previous)), macKeys: map[string][]byte{}}
	raw := make(map[string][]byte, 1+len(previous))
	for i, key := range append([][]byte{current}, previous...) {
		if len(key) != KeySize {
			which := "current key"
			if i > 0 {
				which = fmt.Sprintf("previous key %d", i)
			}
			return nil, fmt.Errorf("seal: %s is %d bytes, want %d", which, len(key), KeySize)
		}
		kid := KeyID(key)
		if prior, ok := raw[kid]; ok {
			if string(prior) == string(key) {
				continue // the same key listed twice is harmless
			}
			return nil, fmt.Errorf("seal: two different keys share key id %s; generate a new key", kid)
		}
		aead, err := newAEAD(key)
		if err != nil {
			return nil, err
		}
		raw[kid] = key
		s.keys[kid] = aead
		s.macKeys[kid] = deriveMACKey(key)
		s.ids = append(s.ids, kid)
		if i == 0 {
			s.currentID = kid
		}
	}
	return s, nil
}

// KeyID is the identifier of a key written into sealed values: the first 8 hex digits of its
// SHA-256. It identifies the key without revealing it.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:])[:kidLen]
}

// KeyID is the id of the current (sealing) key.
func (s *Sealer) KeyID() string { return s.currentID }

// KeyIDs lists the ids of every key the Sealer can open with, the current one first.
func (s *Sealer) KeyIDs() []string { return append([]string(nil), s.ids...) }

// String never shows key material, so a Sealer is safe to print or log.
func (s *Sealer) String() string {
	return fmt.Sprintf("seal.Sealer{current: %s, keys: %d}", s.currentID, len(s.keys))
}

// GoString is String, for %#v.
func (s *Sealer) GoString() string { return s.String() }

// Seal encrypts plaintext under a fresh data key wrapped with the current key. associatedData is
// authenticated but not stored: Open must be given the same bytes (for example the stream and
// field the secret belongs to), which stops a sealed value being copied to another context.
func (s *Sealer) Seal(plaintext, associatedData []byte) (string, error) {
	dataKey := make([]byte, KeySize)
	if _, err := rand.Read(dataKey); err != nil {
		return "", fmt.Errorf("seal: random data key: %w", err)
	}
	defer clear(dataKey)

	header := Version + "." + s.currentID + "."
	wrapped, err := encrypt(s.keys[s.currentID], dataKey, []byte(header))
	if err != nil {
		return "", err
	}
	prefix := header + b64.EncodeToString(wrapped) + "."
	dataAEAD, err := newAEAD(dataKey)
	if err != nil {
		return "", err
	}
	ciphertext, err := encrypt(dataAEAD, plaintext, dataAAD(prefix, associatedData))
	if err != nil {
		return "", err
	}
	return prefix + b64.EncodeToString(ciphertext), nil
}

// Open returns the plaintext of a value from Seal, given the same associated data. It fails with
// ErrMalformed, ErrUnknownKey or ErrAuthentication (wrapped; test with errors.Is).
func (s *Sealer) Open(sealed string, associatedData []byte) ([]byte, error) {
	parts := strings.Split(sealed, ".")
	if len(parts) != 4 || parts[0] != Version || len(parts[1]) != kidLen {
		return nil, ErrMalformed
	}
	kid := parts[1]
	kek, ok := s.keys[kid]
	if !ok {
		return nil, fmt.Errorf("%w (key id %s; configure it as a previous key to open this value)", ErrUnknownKey, kid)
	}
	wrapped, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, ErrMalformed
	}
	ciphertext, err := b64.DecodeString(parts[3])
	if err != nil {
		return nil, ErrMalformed
	}
	header := Version + "." + kid + "."
	dataKey, err := decrypt(kek, wrapped, []byte(header))
	if err != nil {
		return nil, err
	}
	defer clear(dataKey)
	if len(dataKey) != KeySize {
		return nil, ErrMalformed
	}
	dataAEAD, err := newAEAD(dataKey)
	if err != nil {
		return nil, err
	}
	prefix := header + parts[2] + "."
	return decrypt(dataAEAD, ciphertext, dataAAD(prefix, associatedData))
}

// SealedWith returns the key id a sealed value names, without opening it; a value whose id is not
// the current KeyID was sealed before the last rotation.
func SealedWith(sealed string) (string, error) {
	parts := strings.Split(sealed, ".")
	if len(parts) != 4 || parts[0] != Version || len(parts[1]) != kidLen {
		return "", ErrMalformed
	}
	return parts[1], nil
}

// IsSealed reports whether s has the shape of a value from Seal (it does not authenticate it).
func IsSealed(s string) bool {
	_, err := SealedWith(s)
	return err == nil
}

// dataAAD authenticates the envelope (version, kid, wrapped key) together with the caller's
// associated data. The prefix ends at its third '.', and base64url has no '.', so the
// concatenation is unambiguous.
func dataAAD(prefix string, associatedData []byte) []byte {
	aad := make([]byte, 0, len(prefix)+len(associatedData))
	aad = append(aad, prefix...)
	return append(aad, associatedData...)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return aead, nil
}

// encrypt returns nonce || AES-GCM(plaintext) with a random nonce.
func encrypt(aead cipher.AEAD, plaintext, aad []byte) ([]byte, error) {
	out := make([]byte, nonceLen, nonceLen+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("seal: random nonce: %w", err)
	}
	return aead.Seal(out, out[:nonceLen], plaintext, aad), nil
}

func decrypt(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < nonceLen+aead.Overhead() {
		return nil, ErrMalformed
	}
	plaintext, err := aead.Open(nil, sealed[:nonceLen], sealed[nonceLen:], aad)
	if err != nil {
		return nil, ErrAuthentication
	}
	return plaintext, nil
}
