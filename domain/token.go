package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
)

// A bearer token that names its own record (an MCP token, a hook URL's token) has the shape
// <prefix><uuid>_<hex of TokenRandomBytes random bytes>: the id finds the record's stream with no
// index, and only TokenHash of the whole token is stored.

// TokenRandomBytes is how much randomness such a token carries.
const TokenRandomBytes = 32

// TokenLength is the length of a token with prefix.
func TokenLength(prefix string) int { return len(prefix) + 36 + 1 + 2*TokenRandomBytes }

// FormatToken builds the token of id with prefix and the given random bytes.
func FormatToken(prefix, id string, random []byte) string {
	return prefix + id + "_" + hex.EncodeToString(random)
}

// TokenID returns the id embedded in a token with prefix, checking only its shape: whether the
// token is genuine is decided by comparing TokenHash(token) with the stored hash. false: the
// token is malformed.
func TokenID(token, prefix string) (string, bool) {
	const idLength = 36
	if len(token) != TokenLength(prefix) || !strings.HasPrefix(token, prefix) || token[len(prefix)+idLength] != '_' {
		return "", false
	}
	idText := token[len(prefix) : len(prefix)+idLength]
	id, err := uuid.Parse(idText)
	if err != nil || id.String() != idText {
		// Only the canonical lowercase form names a stream, so one token has one spelling.
		return "", false
	}
	for _, c := range []byte(token[len(prefix)+idLength+1:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return idText, true
}

// TokenHash is the stored form of a token: the lowercase hex SHA-256 of the whole token.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
