package httpapi

import (
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The signed parts of an SDK request as the client sent them: target, timestamp, signature and
// body.

// requestTarget is the path and query string exactly as the client sent them.
func requestTarget(r *http.Request) string {
	if r.RequestURI != "" {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// parseTimestamp reads Unix seconds written as plain decimal digits.
func parseTimestamp(s string) (time.Time, bool) {
	if s == "" || len(s) > 12 {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// decodeSignature reads base64 (standard alphabet; padding optional) of a 64-byte signature.
func decodeSignature(s string) ([]byte, bool) {
	if s == "" || len(s) > 100 {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil || len(b) != ed25519.SignatureSize {
		return nil, false
	}
	return b, true
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	defer r.Body.Close()
	return io.ReadAll(r.Body)
}
