package identity

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/user"
	"github.com/switchyard/switchyard/internal/password"
)

// Cookie names. The session cookie holds the session JWT; the CSRF cookie the double-submit
// token every form repeats in a hidden field.
const (
	SessionCookie = "sy_session"
	CSRFCookie    = "sy_csrf"
	csrfField     = "csrf_token"
)

// ThrottleOptions limits failed sign-ins per account and per client address.
type ThrottleOptions struct {
	Window        time.Duration // default 15 minutes
	PerAccount    int           // failures per account in a window; default 5
	PerClientAddr int           // failures per address in a window; default 20
}

type throttle struct {
	o   ThrottleOptions
	now func() time.Time
	mu  sync.Mutex
	hit map[string]*failures
}

type failures struct {
	count int
	since time.Time
}

func newThrottle(o ThrottleOptions, now func() time.Time) *throttle {
	if o.Window <= 0 {
		o.Window = 15 * time.Minute
	}
	if o.PerAccount <= 0 {
		o.PerAccount = 5
	}
	if o.PerClientAddr <= 0 {
		o.PerClientAddr = 20
	}
	return &throttle{o: o, now: now, hit: map[string]*failures{}}
}

// blocked returns how long the caller must wait, 0 when a sign-in may be tried.
func (t *throttle) blocked(account, addr string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var wait time.Duration
	check := func(key string, limit int) {
		f := t.hit[key]
		if f == nil {
			return
		}
		if now.Sub(f.since) >= t.o.Window {
			delete(t.hit, key)
			return
		}
		if f.count >= limit {
			wait = max(wait, f.since.Add(t.o.Window).Sub(now))
		}
	}
	check("a:"+account, t.o.PerAccount)
	check("i:"+addr, t.o.PerClientAddr)
	return wait
}

func (t *throttle) fail(account, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if len(t.hit) > 100_000 { // bound memory under a spray of addresses
		for k, f := range t.hit {
			if now.Sub(f.since) >= t.o.Window {
				delete(t.hit, k)
			}
		}
	}
	for _, key := range []string{"a:" + account, "i:" + addr} {
		f := t.hit[key]
		if f == nil || now.Sub(f.since) >= t.o.Window {
			f = &failures{since: now}
			t.hit[key] = f
		}
		f.count++
	}
}

func (t *throttle) succeed(account string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.hit, "a:"+account)
}

// clientAddr is the peer address. Forwarded headers are not trusted: behind a proxy, the proxy
// must be the one that throttles by client address (docs/identity.md).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

var dummyHash = sync.OnceValue(func() string {
	h, _ := password.Hash("not-a-password-anyone-has")
	return h
})

var (
	errBadCredentials = errors.New("invalid email or password")
	errThrottled      = errors.New("too many failed sign-ins")
)

// signIn checks credentials under the throttle and starts a session. An unknown email costs the
// same argon2id work as a wrong password, so timing does not reveal which accounts exist.
func (p *Provider) signIn(ctx context.Context, email, pw, addr string) (token string, wait time.Duration, err error) {
	account := user.NormalizeEmail(email)
	if wait := p.throttle.blocked(account, addr); wait > 0 {
		return "", wait, errThrottled
	}
	u, err := p.cmds.UserByEmail(ctx, account)
	hash := u.PasswordHash
	if err != nil {
		if !errors.Is(err, domain.ErrNotFound) {
			return "", 0, err
		}
		hash = dummyHash()
	}
	ok, verr := password.Verify(hash, pw)
	if err != nil || verr != nil || !ok {
		p.throttle.fail(account, addr)
		return "", 0, errBadCredentials
	}
	p.throttle.succeed(account)
	s, err := p.cmds.StartSession(ctx, u.ID, p.opts.SessionTTL)
	if err != nil {
		return "", 0, err
	}
	token, err = p.keys.Sign(tokenClaims{Issuer: p.issuer, Subject: u.ID, Audience: sessionAudience, SessionID: s.ID,
		IssuedAt: s.StartedAt.Unix(), ExpiresAt: s.ExpiresAt.Unix()})
	return token, 0, err
}

// session returns the signed-in user of a browser request, from the session cookie.
func (p *Provider) session(r *http.Request) (Principal, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return Principal{}, false
	}
	pr, err := p.VerifyBearer(r.Context(), c.Value)
	if err != nil || !pr.Session {
		return Principal{}, false
	}
	return pr, true
}

func (p *Provider) sessionAuthTime(r *http.Request) time.Time {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return p.now()
	}
	claims, err := p.parse(r.Context(), c.Value, true)
	if err != nil {
		return p.now()
	}
	return unix(claims.IssuedAt)
}

func (p *Provider) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: p.secure, SameSite: http.SameSiteLaxMode})
}

// csrfToken returns the request's CSRF token, setting the cookie when there is none yet.
func (p *Provider) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(CSRFCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	p.setCookie(w, CSRFCookie, v, 0)
	return v
}

// checkCSRF compares the form's token with the cookie (double submit). Another site can make a
// browser send the cookie, but cannot read it to put it in the form.
func checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(CSRFCookie)
	if err != nil || len(c.Value) < 32 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue(csrfField))) == 1
}

// safeReturn keeps redirects after sign-in on this site.
func safeReturn(to string) string {
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") || strings.HasPrefix(to, "/\\") {
		return "/developer/apps"
	}
	return to
}

type loginData struct {
	CSRF, ReturnTo, Email, Error string
}

func (p *Provider) loginPage(w http.ResponseWriter, r *http.Request) {
	p.render(w, http.StatusOK, "login", "Sign in", loginData{CSRF: p.csrfToken(w, r), ReturnTo: safeReturn(r.URL.Query().Get("return_to"))})
}

func (p *Provider) loginSubmit(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !checkCSRF(r) {
		p.errorPage(w, http.StatusForbidden, "This form has expired", "Go back, reload the page and try again.")
		return
	}
	email, ret := strings.TrimSpace(r.PostForm.Get("email")), safeReturn(r.PostForm.Get("return_to"))
	token, wait, err := p.signIn(r.Context(), email, r.PostForm.Get("password"), clientAddr(r))
	data := loginData{CSRF: p.csrfToken(w, r), ReturnTo: ret, Email: email}
	switch {
	case errors.Is(err, errThrottled):
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		data.Error = "Too many failed attempts. Wait a few minutes, then try again."
		p.render(w, http.StatusTooManyRequests, "login", "Sign in", data)
	case errors.Is(err, errBadCredentials):
		data.Error = "That email and password do not match an account."
		p.render(w, http.StatusUnauthorized, "login", "Sign in", data)
	case err != nil:
		p.log.WithError(err).Error("sign in")
		p.errorPage(w, http.StatusInternalServerError, "Something went wrong", "Try again in a moment.")
	default:
		p.setCookie(w, SessionCookie, token, int(p.opts.SessionTTL/time.Second))
		http.Redirect(w, r, ret, http.StatusSeeOther)
	}
}

func (p *Provider) logoutPage(w http.ResponseWriter, r *http.Request) {
	p.render(w, http.StatusOK, "logout", "Sign out", loginData{CSRF: p.csrfToken(w, r)})
}

func (p *Provider) logoutSubmit(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !checkCSRF(r) {
		p.errorPage(w, http.StatusForbidden, "This form has expired", "Go back, reload the page and try again.")
		return
	}
	if pr, ok := p.session(r); ok {
		if err := p.cmds.EndSession(r.Context(), pr.SessionID); err != nil {
			p.log.WithError(err).Error("sign out")
		}
	}
	p.setCookie(w, SessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// apiLogin is POST /v1/auth/login: {email, password} -> a session JWT for the dashboard JSON
// endpoints (Authorization: Bearer). Errors have the SPEC.md 7 body.
func (p *Provider) apiLogin(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "body must be a JSON object with email and password")
		return
	}
	if body.Email == "" || body.Password == "" {
		apiError(w, http.StatusBadRequest, "email and password are required")
		return
	}
	token, wait, err := p.signIn(r.Context(), body.Email, body.Password, clientAddr(r))
	switch {
	case errors.Is(err, errThrottled):
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		apiError(w, http.StatusTooManyRequests, "too many failed sign-ins; retry later")
	case errors.Is(err, errBadCredentials):
		apiError(w, http.StatusUnauthorized, "invalid email or password")
	case err != nil:
		p.log.WithError(err).Error("sign in")
		apiError(w, http.StatusInternalServerError, "internal error")
	default:
		noStore(w)
		writeJSON(w, http.StatusOK, map[string]any{"token": token, "tokenType": "Bearer", "expiresIn": int64(p.opts.SessionTTL / time.Second)})
	}
}

// apiError writes the SPEC.md 7 body (the identity package does not import the http package,
// which imports it).
func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"message": msg, "statusCode": status, "error": http.StatusText(status)})
}
