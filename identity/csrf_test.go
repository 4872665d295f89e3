package identity_test

import (
	"crypto/rand"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/testenv"
)

// TestCSRFTokenIsBoundToTheSession: a form token made for one session is refused in another,
// and a value of the attacker's choosing in both the CSRF cookie and the form field is refused,
// before sign-in and after.
func TestCSRFTokenIsBoundToTheSession(t *testing.T) {
	r := newRig(t)
	alice, bob := r.user(false), r.user(false)
	a, b := r.browser(), r.browser()
	a.signIn(alice)
	b.signIn(bob)
	tokenOf := func(br *browser) string { return hidden(br.do("GET", "/logout", nil).body).Get("csrf_token") }
	create := func(token string) url.Values {
		return url.Values{"csrf_token": {token}, "name": {"Probe"}, "redirect_uris": {"https://probe.example/cb"}, "scopes": {"openid"}}
	}
	if p := b.do("POST", "/developer/apps", create(tokenOf(a))); p.status != http.StatusForbidden || !strings.Contains(p.body, "This form has expired") {
		t.Fatalf("bob's form with alice's token: %d", p.status)
	}
	if p := b.do("POST", "/developer/apps", create(tokenOf(b))); p.status != http.StatusSeeOther {
		t.Fatalf("bob's form with his own token: %d %s", p.status, p.body)
	}

	// A chosen value in cookie and field (the old double submit), signed in or not.
	chosen := strings.Repeat("A", 43)
	base, _ := url.Parse(r.srv.URL)
	b.c.Jar.SetCookies(base, []*http.Cookie{{Name: identity.CSRFCookie, Value: chosen, Path: "/"}})
	if p := b.do("POST", "/developer/apps", create(chosen)); p.status != http.StatusForbidden {
		t.Fatalf("signed in, chosen cookie and field: %d", p.status)
	}
	stranger := r.browser()
	stranger.c.Jar.SetCookies(base, []*http.Cookie{{Name: identity.CSRFCookie, Value: chosen, Path: "/"}})
	signIn := url.Values{"csrf_token": {chosen}, "email": {alice.Email}, "password": {testPassword}}
	if p := stranger.do("POST", "/login", signIn); p.status != http.StatusForbidden {
		t.Fatalf("sign-in with a chosen cookie and field: %d", p.status)
	}
	// The sign-in form's token belongs to the cookie it was made for, not to another browser's.
	signIn.Set("csrf_token", hidden(r.browser().do("GET", "/login", nil).body).Get("csrf_token"))
	if p := stranger.do("POST", "/login", signIn); p.status != http.StatusForbidden {
		t.Fatalf("sign-in with another browser's token: %d", p.status)
	}
}

// TestHTTPSCookiesCarryTheHostPrefix: with an https issuer the session and CSRF cookies are
// __Host- cookies (Secure, Path=/, no Domain), and a session cookie without the prefix, as a
// sibling subdomain could plant, is not read.
func TestHTTPSCookiesCarryTheHostPrefix(t *testing.T) {
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	r := startRig(t, testenv.New(t), &clock{}, key, "https://switchyard.example")
	who := r.user(false)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(r.srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	csrf := cookieNamed(t, resp, identity.SecureCookiePrefix+identity.CSRFCookie)
	form := url.Values{"csrf_token": {hidden(body).Get("csrf_token")}, "email": {who.Email}, "password": {testPassword}}
	req, _ := http.NewRequest("POST", r.srv.URL+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: csrf.Name, Value: csrf.Value})
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	session := cookieNamed(t, resp, identity.SecureCookiePrefix+identity.SessionCookie)
	for name, want := range map[string]int{session.Name: http.StatusOK, identity.SessionCookie: http.StatusSeeOther} {
		req, _ := http.NewRequest("GET", r.srv.URL+"/developer/apps", nil)
		req.AddCookie(&http.Cookie{Name: name, Value: session.Value})
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if resp.StatusCode != want {
			t.Errorf("session in cookie %s: %d, want %d", name, resp.StatusCode, want)
		}
	}
}

// cookieNamed finds a cookie the response sets and checks it is one a browser accepts with the
// __Host- prefix.
func cookieNamed(t *testing.T, resp *http.Response, name string) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == name {
			if !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
				t.Fatalf("cookie %s: %s", name, c.String())
			}
			return c
		}
	}
	t.Fatalf("no cookie %s in %v", name, resp.Header.Values("Set-Cookie"))
	return nil
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
