package identity_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/testenv"
)

// answer is a response's status, Retry-After and body.
type answer struct {
	status     int
	retryAfter string
	body       string
}

func send(t *testing.T, req *http.Request) answer {
	t.Helper()
	c := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b)}
}

func newRequest(t *testing.T, method, target, contentType, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

// A database that refuses connections makes the identity routes answer 503 with Retry-After
// in each one's own form: the SPEC.md 7 body on the JSON sign-in, an RFC 6749
// temporarily_unavailable error on the OAuth endpoints, a page in words on the HTML pages. The
// service answers normally again once the database is back.
func TestDatabaseOutageAnswers503AndRecovers(t *testing.T) {
	r := newRig(t)
	who := r.user(false)
	b := r.browser()
	loginForm := hidden(b.do("GET", "/login", nil).body) // its CSRF token, taken while the database is up
	loginForm.Set("email", who.Email)
	loginForm.Set("password", testPassword)
	var dbName string
	if err := r.env.Pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	apiLogin := func() answer {
		body, _ := json.Marshal(map[string]string{"email": who.Email, "password": testPassword})
		return send(t, newRequest(t, http.MethodPost, r.srv.URL+"/v1/auth/login", "application/json", string(body)))
	}

	testdb.SetConnections(t, dbName, false)
	t.Cleanup(func() { testdb.SetConnections(t, dbName, true) })

	a := apiLogin()
	var e struct {
		StatusCode int
		Error      string
		Message    string
	}
	if a.status != http.StatusServiceUnavailable || a.retryAfter == "" || json.Unmarshal([]byte(a.body), &e) != nil ||
		e.StatusCode != http.StatusServiceUnavailable || e.Error != "Service Unavailable" || e.Message == "" {
		t.Fatalf("POST /v1/auth/login: %d Retry-After %q %s", a.status, a.retryAfter, a.body)
	}

	if p := b.do("POST", "/login", loginForm); p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, "Temporarily unavailable") {
		t.Fatalf("POST /login: %d %s", p.status, p.body)
	}
	// A client never seen before: its lookup needs the database.
	unseen := uuid.NewString()
	authorize := "/oauth/authorize?" + url.Values{"client_id": {unseen}, "response_type": {"code"},
		"redirect_uri": {"http://127.0.0.1:9/callback"}, "scope": {"openid"}}.Encode()
	page := send(t, newRequest(t, http.MethodGet, r.srv.URL+authorize, "", ""))
	if page.status != http.StatusServiceUnavailable || page.retryAfter == "" || !strings.Contains(page.body, "Temporarily unavailable") {
		t.Fatalf("GET /oauth/authorize: %d Retry-After %q %s", page.status, page.retryAfter, page.body)
	}
	tokenReq := newRequest(t, http.MethodPost, r.srv.URL+"/oauth/token", "application/x-www-form-urlencoded",
		url.Values{"grant_type": {"authorization_code"}, "code": {"x"}, "redirect_uri": {"http://127.0.0.1:9/callback"}}.Encode())
	tokenReq.SetBasicAuth(unseen, "secret")
	tok := send(t, tokenReq)
	var oe struct{ Error string }
	if tok.status != http.StatusServiceUnavailable || tok.retryAfter == "" || json.Unmarshal([]byte(tok.body), &oe) != nil ||
		oe.Error != "temporarily_unavailable" {
		t.Fatalf("POST /oauth/token: %d Retry-After %q %s", tok.status, tok.retryAfter, tok.body)
	}
	for _, x := range []answer{a, tok, page} {
		if strings.Contains(x.body, "127.0.0.1:") || strings.Contains(x.body, dbName) {
			t.Fatalf("an answer names the database: %s", x.body)
		}
	}

	testdb.SetConnections(t, dbName, true)
	testenv.Eventually(t, 60*time.Second, "sign-in to work again", func() bool { return apiLogin().status == http.StatusOK })
}
