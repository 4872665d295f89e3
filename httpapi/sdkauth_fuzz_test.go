package httpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/internal/apikeys"
)

// What one fuzzed request changes of the genuine signed request it starts from.
const (
	tamperNothing = iota
	tamperMethod
	tamperTarget
	tamperTimestamp
	tamperBody
	tamperSignature
	tamperAPIKey
	tamperSignatureBit
	tamperKinds
)

// FuzzSDKSignature drives the SDK authentication middleware with a request signed by a
// genuine key and then changed in one part (or not at all). Seeds are in
// testdata/fuzz/FuzzSDKSignature.
//
// Properties: nothing panics and nothing answers 500; a refusal is 401 with one of the three
// messages of SPEC.md 5; the handler runs only for a request whose signed message, key and
// timestamp are the genuine ones, and then reads the very body that was verified; an
// unchanged request within the skew window is accepted; a state-changing request is accepted
// once, its replay refused.
func FuzzSDKSignature(f *testing.F) {
	f.Add("POST", "/v1/sdk/components", []byte(`{"module":"core.echo"}`), int64(0), uint8(tamperNothing), []byte(nil))
	f.Add("GET", "/v1/sdk/components/x?wait=1", []byte(nil), int64(-300), uint8(tamperTarget), []byte("/v1/sdk/components/y?wait=1"))
	key, priv := fuzzSDKKey(f)
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, method, target string, body []byte, offset int64, tamper uint8, alt []byte) {
		if offset < -1e6 || offset > 1e6 {
			return // far outside the window either way; keeps the timestamp arithmetic exact
		}
		signed := fuzzRequest{method: method, target: target, ts: strconv.FormatInt(now.Unix()+offset, 10), body: body,
			apiKey: key.apiKey}
		signed.sig = apikeys.Sign(priv, signed.method, signed.target, signed.ts, signed.body)
		sent := signed.tampered(tamper%tamperKinds, alt)
		if !sent.deliverable() {
			return // Go's HTTP server would not hand such a request to a handler
		}
		auth := NewSDKAuth(SDKAuthConfig{Lookup: key.lookup, Now: func() time.Time { return now }})
		var got []byte
		h := auth.Route(1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, _ = io.ReadAll(r.Body)
			w.WriteHeader(http.StatusNoContent)
		}))
		status := sent.serve(t, h)
		accepted := status == http.StatusNoContent
		genuine := sent.apiKey == key.apiKey && sent.sameSignature(signed) &&
			bytes.Equal(sent.message(), signed.message()) && sent.fresh(now)
		switch {
		case accepted && !genuine:
			t.Fatalf("accepted a request that is not the signed one (tamper %d):\nsigned %+v\nsent   %+v", tamper%tamperKinds, signed, sent)
		case accepted && !bytes.Equal(got, sent.body):
			t.Fatalf("handler read %q, but %q was verified", got, sent.body)
		case !accepted && sent.equal(signed) && genuine:
			t.Fatalf("refused (%d) the unchanged signed request %+v", status, sent)
		}
		if accepted && method != http.MethodGet && method != http.MethodHead {
			if again := sent.serve(t, h); again != http.StatusUnauthorized {
				t.Fatalf("replay of %s answered %d, want 401", method, again)
			}
		}
	})
}

type fuzzKey struct {
	apiKey string
	stored SDKKey
}

func (k fuzzKey) lookup(_ context.Context, id string) (SDKKey, error) {
	if id != k.stored.ID {
		return SDKKey{}, fmt.Errorf("api key %s: %w", id, domain.ErrNotFound)
	}
	return k.stored, nil
}

// fuzzSDKKey mints the one key every request of a run is signed with.
func fuzzSDKKey(f *testing.F) (fuzzKey, ed25519.PrivateKey) {
	m, err := apikeys.Mint(uuid.MustParse("0190a8b4-0000-7000-8000-000000000001"), nil)
	if err != nil {
		f.Fatal(err)
	}
	priv, err := apikeys.ParseSecret(m.APISecret)
	if err != nil {
		f.Fatal(err)
	}
	pub, err := apikeys.ParsePublicKey(m.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	return fuzzKey{apiKey: m.APIKey, stored: SDKKey{ID: m.ID, WorkspaceID: "ws", KeyHash: m.KeyHash, PublicKey: pub}}, priv
}

type fuzzRequest struct {
	method, target, ts, sig, apiKey string
	body                            []byte
}

func (r fuzzRequest) message() []byte { return apikeys.Message(r.method, r.target, r.ts, r.body) }

func (r fuzzRequest) equal(o fuzzRequest) bool {
	return r.method == o.method && r.target == o.target && r.ts == o.ts && r.sig == o.sig &&
		r.apiKey == o.apiKey && bytes.Equal(r.body, o.body)
}

// sameSignature compares the decoded signatures: padding is optional on the wire.
func (r fuzzRequest) sameSignature(o fuzzRequest) bool {
	a, ok1 := decodeSignature(r.sig)
	b, ok2 := decodeSignature(o.sig)
	return ok1 && ok2 && bytes.Equal(a, b)
}

// fresh reports whether the timestamp is within the default skew of now.
func (r fuzzRequest) fresh(now time.Time) bool {
	ts, ok := parseTimestamp(r.ts)
	return ok && !ts.Before(now.Add(-DefaultSDKSkew)) && !ts.After(now.Add(DefaultSDKSkew))
}

func (r fuzzRequest) tampered(kind uint8, alt []byte) fuzzRequest {
	switch kind {
	case tamperMethod:
		r.method = string(alt)
	case tamperTarget:
		r.target = string(alt)
	case tamperTimestamp:
		r.ts = string(alt)
	case tamperBody:
		r.body = alt
	case tamperSignature:
		r.sig = string(alt)
	case tamperAPIKey:
		r.apiKey = string(alt)
	case tamperSignatureBit:
		if sig, ok := decodeSignature(r.sig); ok && len(alt) > 0 {
			sig[int(alt[0])%len(sig)] ^= 1 << (alt[len(alt)-1] % 8)
			r.sig = base64.StdEncoding.EncodeToString(sig)
		}
	}
	r.body = bytes.Clone(r.body)
	return r
}

// deliverable reports whether net/http's server could receive the request: a token method, a
// target without spaces or controls, header values on one line.
func (r fuzzRequest) deliverable() bool {
	if r.method == "" || strings.IndexFunc(r.method, func(c rune) bool { return !isTokenChar(c) }) >= 0 {
		return false
	}
	if r.target == "" || strings.IndexFunc(r.target, func(c rune) bool { return c <= ' ' || c >= 0x7f }) >= 0 {
		return false
	}
	for _, v := range []string{r.ts, r.sig, r.apiKey} {
		if strings.ContainsAny(v, "\r\n\x00") || v != strings.TrimSpace(v) {
			return false
		}
	}
	return true
}

func isTokenChar(c rune) bool {
	return c < 127 && c > ' ' && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c)
}

// serve runs the request through h and checks the answer's shape: 204 from the handler, or a
// 401 with one of the three messages.
func (r fuzzRequest) serve(t *testing.T, h http.Handler) int {
	t.Helper()
	req := &http.Request{Method: r.method, RequestURI: r.target, URL: &url.URL{Path: "/"}, Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: int64(len(r.body))}
	req = req.WithContext(context.Background())
	req.Header.Set(HeaderAPIKey, r.apiKey)
	req.Header.Set(HeaderSDKTimestamp, r.ts)
	req.Header.Set(HeaderSDKSignature, r.sig)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	switch rec.Code {
	case http.StatusNoContent:
	case http.StatusUnauthorized:
		var b ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("401 body %q: %v", rec.Body.Bytes(), err)
		}
		if b.Message != MsgInvalidAPIKey && b.Message != MsgInvalidSignature && b.Message != MsgExpiredTimestamp {
			t.Fatalf("401 says %q, not one of the three messages of SPEC.md 5", b.Message)
		}
	default:
		t.Fatalf("answered %d %q to %+v", rec.Code, rec.Body.Bytes(), r)
	}
	return rec.Code
}
