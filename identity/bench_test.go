package identity_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"

	"github.com/switchyard/switchyard/commands"
)

// The token endpoint's figures in docs/performance.md come from these benchmarks, run together:
//
//	go test ./identity/ -run '^$' -bench 'RS256|TokenEndpoint' -benchtime 3s
//
// BenchmarkRS256Sign is the ceiling: each token response signs two JWTs, so the signing-bound
// rate of the endpoint is half the signing rate.

func BenchmarkRS256Sign(b *testing.B) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	claims := jwt.MapClaims{"iss": "https://id.example", "sub": "u", "aud": "c", "client_id": "c", "workspace_id": "w",
		"scope": "openid workspace:read", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(), "jti": "x"}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
			t.Header["kid"] = "k"
			if _, err := t.SignedString(key); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

type benchRig struct {
	r      *rig
	client registered
	ws     string
	owner  account
}

func newBenchRig(b *testing.B) *benchRig {
	r := newRigTB(b)
	owner := r.user(false)
	ws := r.workspace(owner, 1)
	return &benchRig{r: r, client: r.app(owner, "openid", "workspace:read"), ws: ws, owner: owner}
}

// code grants a fresh code directly through the command (the browser part is not measured).
func (br *benchRig) code(b *testing.B) (code, verifier string) {
	verifier = oauth2.GenerateVerifier()
	_, code, err := br.r.cmds.Apps.GrantAuthorization(context.Background(), commands.GrantAuthorization{UserID: br.owner.ID,
		ClientID: br.client.ClientID, WorkspaceID: br.ws, Scopes: []string{"openid", "workspace:read"},
		CodeChallenge: oauth2.S256ChallengeFromVerifier(verifier), RedirectURI: br.client.RedirectURI, AuthTime: time.Now(), CodeTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return code, verifier
}

func (br *benchRig) post(hc *http.Client, form url.Values) (map[string]any, bool) {
	req, _ := http.NewRequest("POST", br.r.srv.URL+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(br.client.ClientID, br.client.Secret)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	out := map[string]any{}
	if resp.StatusCode != 200 {
		return out, false
	}
	err = jsonDecode(resp, &out)
	return out, err == nil
}

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
}

func BenchmarkTokenEndpointRefresh(b *testing.B) {
	br := newBenchRig(b)
	hc := benchClient()
	b.SetParallelism(benchParallelism)
	var failed atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Each goroutine refreshes its own chain, as distinct clients do.
		code, verifier := br.code(b)
		tok, ok := br.post(hc, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
			"redirect_uri": {br.client.RedirectURI}})
		if !ok {
			b.Error("exchange failed")
			return
		}
		rt := tok["refresh_token"].(string)
		for pb.Next() {
			out, ok := br.post(hc, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
			if !ok {
				failed.Add(1)
				continue
			}
			rt = out["refresh_token"].(string)
		}
	})
	if failed.Load() > 0 {
		b.Fatalf("%d refreshes failed", failed.Load())
	}
}

func BenchmarkTokenEndpointCode(b *testing.B) {
	br := newBenchRig(b)
	hc := benchClient()
	type pair struct{ code, verifier string }
	codes := make(chan pair, b.N)
	for range b.N {
		c, v := br.code(b)
		codes <- pair{c, v}
	}
	close(codes)
	b.SetParallelism(benchParallelism)
	var failed atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := <-codes
			if _, ok := br.post(hc, url.Values{"grant_type": {"authorization_code"}, "code": {p.code}, "code_verifier": {p.verifier},
				"redirect_uri": {br.client.RedirectURI}}); !ok {
				failed.Add(1)
			}
		}
	})
	if failed.Load() > 0 {
		b.Fatalf("%d exchanges failed", failed.Load())
	}
}

// benchParallelism goroutines per CPU keep both cores busy while requests wait on PostgreSQL.
const benchParallelism = 16
