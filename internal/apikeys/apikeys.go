// Package apikeys makes and reads the key material of workspace API keys (SPEC.md 2.10) and the
// request signatures made with it (SPEC.md 5). It lives outside domain/ because minting a key
// draws randomness, which is I/O.
//
// An apiKey is "ws_" + base62(key id, 16 bytes, 22 characters) + "_" + base62(32 random bytes,
// 43 characters). The id is embedded so the server finds the key's stream in the event store
// directly, with no read-model lag and no lookup by secret value; the 32 random bytes are what
// makes the key unguessable, and only their SHA-256 (of the whole key) is stored.
package apikeys

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"

	"github.com/google/uuid"
)

// Prefix starts every apiKey.
const Prefix = "ws_"

// Lengths of the base62 parts of an apiKey: the most digits 16 and 32 bytes can need.
const (
	idDigits     = 22
	randomDigits = 43
	randomBytes  = 32
	// Length is the length of every apiKey.
	Length = len(Prefix) + idDigits + 1 + randomDigits
)

// ErrMalformed means a string is not an apiKey, an apiSecret or a signature of the right shape.
var ErrMalformed = errors.New("malformed key material")

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

var base = big.NewInt(62)

// encode62 writes b as a big-endian number in base62, left-padded with '0' to width.
func encode62(b []byte, width int) string {
	n := new(big.Int).SetBytes(b)
	out := make([]byte, width)
	mod := new(big.Int)
	for i := width - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = alphabet[mod.Int64()]
	}
	return string(out)
}

// decode62 reads s as a base62 number that must fit in size bytes. It multiplies a big-endian
// byte array in place, a digit at a time: every SDK request parses its apiKey, and a big.Int
// for it was most of what parsing cost. The number never shrinks as digits come, so a carry
// out of the top byte at any step means it does not fit.
func decode62(s string, size int) ([]byte, error) {
	out := make([]byte, size)
	for i := 0; i < len(s); i++ {
		d := digit62[s[i]]
		if d < 0 {
			return nil, ErrMalformed
		}
		carry := uint(d)
		for j := size - 1; j >= 0; j-- {
			v := uint(out[j])*62 + carry
			out[j], carry = byte(v), v>>8
		}
		if carry != 0 {
			return nil, ErrMalformed
		}
	}
	return out, nil
}

// digit62 is each byte's value as a base62 digit, -1 for a byte that is none.
var digit62 = func() (t [256]int8) {
	for i := range t {
		t[i] = int8(strings.IndexByte(alphabet, byte(i)))
	}
	return t
}()

// Minted is freshly generated key material. APISecret is shown to the caller once; the service
// keeps KeyHash and PublicKey only.
type Minted struct {
	ID        string
	APIKey    string
	APISecret string
	KeyHash   string
	// PublicKey is the base64 (standard encoding) of the raw 32-byte Ed25519 public key.
	PublicKey string
}

// Mint generates an apiKey for the key id and a fresh Ed25519 key pair, reading rnd
// (crypto/rand.Reader when nil).
func Mint(id uuid.UUID, rnd io.Reader) (Minted, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	secret := make([]byte, randomBytes)
	if _, err := io.ReadFull(rnd, secret); err != nil {
		return Minted{}, fmt.Errorf("mint api key: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rnd)
	if err != nil {
		return Minted{}, fmt.Errorf("mint api key pair: %w", err)
	}
	key := Format(id, secret)
	apiSecret, err := EncodeSecret(priv)
	if err != nil {
		return Minted{}, err
	}
	return Minted{ID: id.String(), APIKey: key, APISecret: apiSecret, KeyHash: Hash(key),
		PublicKey: base64.StdEncoding.EncodeToString(pub)}, nil
}

// Format builds the apiKey of id with the given 32 random bytes.
func Format(id uuid.UUID, random []byte) string {
	return Prefix + encode62(id[:], idDigits) + "_" + encode62(random, randomDigits)
}

// ParseID returns the key id embedded in an apiKey, checking only the key's shape: whether the
// key is genuine is decided by comparing Hash(apiKey) with the stored hash.
func ParseID(apiKey string) (string, error) {
	if len(apiKey) != Length || !strings.HasPrefix(apiKey, Prefix) || apiKey[len(Prefix)+idDigits] != '_' {
		return "", ErrMalformed
	}
	idBytes, err := decode62(apiKey[len(Prefix):len(Prefix)+idDigits], 16)
	if err != nil {
		return "", err
	}
	if _, err := decode62(apiKey[len(Prefix)+idDigits+1:], randomBytes); err != nil {
		return "", err
	}
	id, err := uuid.FromBytes(idBytes)
	if err != nil {
		return "", ErrMalformed
	}
	return id.String(), nil
}

// Hash is the stored form of an apiKey: the lowercase hex SHA-256 of the whole key.
func Hash(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:])
}

// EncodeSecret renders a private key as an apiSecret: base64 (standard encoding) of PKCS#8 DER.
func EncodeSecret(priv ed25519.PrivateKey) (string, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", fmt.Errorf("encode api secret: %w", err)
	}
	return base64.StdEncoding.EncodeToString(der), nil
}

// ParseSecret reads an apiSecret back into the Ed25519 private key.
func ParseSecret(apiSecret string) (ed25519.PrivateKey, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(apiSecret))
	if err != nil {
		return nil, fmt.Errorf("api secret: %w", ErrMalformed)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("api secret: %w", ErrMalformed)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("api secret is not an Ed25519 key: %w", ErrMalformed)
	}
	return priv, nil
}

// ParsePublicKey reads the stored base64 form of a public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key: %w", ErrMalformed)
	}
	return ed25519.PublicKey(b), nil
}

// Message is the signed text of a request: METHOD|PATH|TIMESTAMP|BODY, where PATH is the request
// target as sent (path and query string) and TIMESTAMP the X-Sdk-Timestamp header's exact text.
// A request without a body signs an empty BODY, so the message ends with "|".
func Message(method, target, timestamp string, body []byte) []byte {
	msg := make([]byte, 0, len(method)+len(target)+len(timestamp)+len(body)+3)
	msg = append(msg, method...)
	msg = append(msg, '|')
	msg = append(msg, target...)
	msg = append(msg, '|')
	msg = append(msg, timestamp...)
	msg = append(msg, '|')
	return append(msg, body...)
}

// Sign returns the X-Sdk-Signature value of a request: base64 (standard encoding) Ed25519.
func Sign(priv ed25519.PrivateKey, method, target, timestamp string, body []byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(priv, Message(method, target, timestamp, body)))
}
