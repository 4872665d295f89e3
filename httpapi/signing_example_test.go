package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
)

// The worked example of docs/authentication.md. The test derives every value from the seed and
// fails if the code or the page drifts from them.
const (
	exampleSeedHex   = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
	exampleSecret    = "MC4CAQAwBQYDK2VwBCIEIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g"
	examplePublicKey = "ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ="
	exampleKeyID     = "5f0c6e1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b"
	exampleAPIKey    = "ws_2tLx03u00KiPqzy0l12SS3_7r84C2XeCDzjBL1ukuxrbwSR6biqKcPnKHlgyr3UzuS"
	exampleKeyHash   = "4eb89cfd587b721fae5d4ffe74926fe99b8edefd1b0b897216ab25bfd2db7de7"
	exampleTarget    = "/v1/sdk/components?trace=docs"
	exampleTimestamp = "1767225600"
	exampleBody      = `{"module":"core.echo","input":{"text":"hello"},"config":{}}`
	exampleMessage   = `POST|/v1/sdk/components?trace=docs|1767225600|{"module":"core.echo","input":{"text":"hello"},"config":{}}`
	exampleSignature = "BAbCXG+EPfxKtz7vgUDBggceXL3pCT3E52DppYpBrlfCci9+j2ygpCjewe1GE58xygCm+iwwqBveZYGS/TMKDw=="
	exampleGetTarget = "/v1/sdk/components/executions/0f8fad5b-d9cb-469f-a165-70867728950e"
	exampleGetMsg    = "GET|/v1/sdk/components/executions/0f8fad5b-d9cb-469f-a165-70867728950e|1767225600|"
	exampleGetSig    = "cRxbxe/ketvbJTRD4WdWS7zEwYsViTHcRk2klAGWR+//z/95UwXis1wgxgoUeKRXZQI02c2Wo2w/kgKXywtsBw=="
)

func TestSigningExampleMatchesDocs(t *testing.T) {
	seed, _ := hex.DecodeString(exampleSeedHex)
	priv := ed25519.NewKeyFromSeed(seed)
	random := make([]byte, 32)
	for i := range random {
		random[i] = byte(0x21 + i)
	}
	secret, err := apikeys.EncodeSecret(priv)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"apiSecret", secret, exampleSecret},
		{"public key", base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)), examplePublicKey},
		{"apiKey", apikeys.Format(uuid.MustParse(exampleKeyID), random), exampleAPIKey},
		{"key hash", apikeys.Hash(exampleAPIKey), exampleKeyHash},
		{"message", string(apikeys.Message("POST", exampleTarget, exampleTimestamp, []byte(exampleBody))), exampleMessage},
		{"signature", apikeys.Sign(priv, "POST", exampleTarget, exampleTimestamp, []byte(exampleBody)), exampleSignature},
		{"GET message", string(apikeys.Message("GET", exampleGetTarget, exampleTimestamp, nil)), exampleGetMsg},
		{"GET signature", apikeys.Sign(priv, "GET", exampleGetTarget, exampleTimestamp, nil), exampleGetSig},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: code gives %q, the example says %q", c.name, c.got, c.want)
		}
	}
	if id, err := apikeys.ParseID(exampleAPIKey); err != nil || id != exampleKeyID {
		t.Errorf("apiKey embeds %q (%v), want %s", id, err, exampleKeyID)
	}
	if p, err := apikeys.ParseSecret(exampleSecret); err != nil || !p.Equal(priv) {
		t.Errorf("apiSecret does not parse back to the seed's key: %v", err)
	}

	doc, err := os.ReadFile("../docs/authentication.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{exampleSeedHex, exampleSecret, examplePublicKey, exampleKeyID, exampleAPIKey, exampleKeyHash,
		"`" + exampleTarget + "`", "`" + exampleTimestamp + "`", "`" + exampleBody + "`",
		"\n" + exampleMessage + "\n", "\n" + exampleSignature + "\n", "\n" + exampleGetMsg + "\n", "\n" + exampleGetSig + "\n",
		httpapi.MsgInvalidAPIKey, httpapi.MsgInvalidSignature, httpapi.MsgExpiredTimestamp} {
		if !strings.Contains(string(doc), v) {
			t.Errorf("docs/authentication.md does not contain %q", v)
		}
	}
}

// TestSigningExampleIsAccepted sends the documented request, at the documented second, through
// the middleware.
func TestSigningExampleIsAccepted(t *testing.T) {
	seed, _ := hex.DecodeString(exampleSeedHex)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{
		Now: func() time.Time { return time.Unix(1767225600, 0) },
		Lookup: func(_ context.Context, id string) (httpapi.SDKKey, error) {
			return httpapi.SDKKey{ID: id, WorkspaceID: "ws", KeyHash: exampleKeyHash, PublicKey: pub, AllowedWorkflowIDs: []string{}}, nil
		},
	})
	ok := false
	h := auth.Route(2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ok = true }))
	r := httptest.NewRequest(http.MethodPost, exampleTarget, strings.NewReader(exampleBody))
	r.Header.Set("X-Api-Key", exampleAPIKey)
	r.Header.Set("X-Sdk-Timestamp", exampleTimestamp)
	r.Header.Set("X-Sdk-Signature", exampleSignature)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if !ok || w.Code != http.StatusOK {
		t.Fatalf("documented request refused: %d %s", w.Code, w.Body)
	}
}
