package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/user"
	"github.com/switchyard/switchyard/internal/emailaddr"
	"github.com/switchyard/switchyard/internal/password"
	"github.com/switchyard/switchyard/web/bearer"
	"github.com/switchyard/switchyard/web/httperr"
)

// Cookie names on plain http (a loopback development service). The session cookie holds the
// session JWT; the CSRF cookie a random value that binds the sign-in form's token before there
// is a session. On https both carry the __Host- prefix (SecureCookiePrefix): a browser accepts
// such a cookie only from this origin, Secure, with Path=/ and no Domain, so a sibling
// subdomain cannot plant one.
const (
	SessionCookie      = bearer.SessionCookie
	CSRFCookie         = "sy_csrf"
	SecureCookiePrefix = "__Host-"
	csrfField          = "csrf_token"
)

// ThrottleConfig limits failed sign-ins per account and per client address.
type ThrottleConfig struct {
	// Window is how long failures are counted. Default 15 minutes.
	Window time.Duration
	// PerAccount is how many failures one account may have in a window. Default 5.
	PerAccount int
	// PerClientAddr is how many failures one client address may have in a window. Default 20.
	PerClientAddr int
}

// setDefaults fills zero values and repairs negative ones with the default: newThrottle
// returns no error.
func (c *ThrottleConfig) setDefaults() {
	if c.Window <= 0 {
		c.Window = 15 * time.Minute
	}
	if c.PerAccount <= 0 {
		c.PerAccount = 5
	}
	if c.PerClientAddr <= 0 {
		c.PerClientAddr = 20
	}
}

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default.
func (c ThrottleConfig) Validate() error {
	switch {
	case c.Window < 0:
		return fmt.Errorf("identity: Throttle.Window %v: must not be negative", c.Window)
	case c.PerAccount < 0:
		return fmt.Errorf("identity: Throttle.PerAccount %d: must be at least 1 (0 takes the default)", c.PerAccount)
	case c.PerClientAddr < 0:
		return fmt.Errorf("identity: Throttle.PerClientAddr %d: must be at least 1 (0 takes the default)", c.PerClientAddr)
	}
	return nil
}

type throttle struct {
	o   ThrottleConfig
	now func() time.Time
	mu  sync.Mutex
	hit map[string]*failures
}

type failures struct {
	count int
	since time.Time
}

func newThrottle(o ThrottleConfig, now func() time.Time) *throttle {
	o.setDefaults()
	return &throttle{o: o, now: now, hit: map[string]*failures{}}
}

// attemptResult is how a reserved sign-in attempt ended.
type attemptResult int

const (
	attemptFailed    attemptResult = iota // wrong email or password: the reservation stays counted
	attemptSucceeded                      // the account's failures are cleared
	attemptAborted                        // no verdict (an error, an overload): the slot is given back
)

// attempt reserves a failure slot for account and addr before the password is checked, so
// parallel attempts cannot all pass the check before any failure is counted. It returns how long
// the caller must wait (and no settle) when a limit is reached; otherwise settle must be called
// once with the outcome.
func (t *throttle) attempt(account, addr string) (settle func(attemptResult), wait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.sweep(now)
	keys := [2]string{"a:" + account, "i:" + addr}
	limits := [2]int{t.o.PerAccount, t.o.PerClientAddr}
	for i, key := range keys {
		f := t.hit[key]
		if f != nil && now.Sub(f.since) >= t.o.Window {
			delete(t.hit, key)
			f = nil
		}
		if f != nil && f.count >= limits[i] {
			wait = max(wait, f.since.Add(t.o.Window).Sub(now))
		}
	}
	if wait > 0 {
		return nil, wait
	}
	reserved := [2]*failures{}
	for i, key := range keys {
		f := t.hit[key]
		if f == nil {
			f = &failures{since: now}
			t.hit[key] = f
		}
		f.count++
		reserved[i] = f
	}
	var once sync.Once
	return func(r attemptResult) { once.Do(func() { t.settle(keys, reserved, r) }) }, 0
}

func (t *throttle) settle(keys [2]string, reserved [2]*failures, r attemptResult) {
	if r == attemptFailed {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, f := range reserved {
		if r == attemptSucceeded && i == 0 {
			if t.hit[keys[0]] == f {
				delete(t.hit, keys[0])
			}
			continue
		}
		if f.count > 0 { // the entry may have been replaced by a new window; the old one is harmless
			f.count--
		}
	}
}

// sweep bounds memory under a spray of addresses.
func (t *throttle) sweep(now time.Time) {
	if len(t.hit) <= 100_000 {
		return
	}
	for k, f := range t.hit {
		if now.Sub(f.since) >= t.o.Window {
			delete(t.hit, k)
		}
	}
}

// gate bounds the number of concurrent password checks: each argon2id check takes 64 MiB and a
// core for tens of milliseconds, so an unbounded burst of sign-ins could exhaust memory.
type gate struct {
	slots chan struct{}
	wait  time.Duration
}

func newGate(n int, wait time.Duration) *gate {
	return &gate{slots: make(chan struct{}, n), wait: wait}
}

// acquire takes a slot, waiting at most the gate's wait; false when none freed up in time.
func (g *gate) acquire(ctx context.Context) bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (g *gate) release() { <-g.slots }

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
	errBusy           = errors.New("too many sign-ins in progress")
)

// signIn checks credentials under the throttle and starts a session. An unknown email costs the
// same argon2id work as a wrong password, so timing does not reveal which accounts exist. An
// address no account can have (one that mixes scripts or reads as another, emailaddr) is a
// validation error naming email, before any work: the refusal depends on the text alone.
func (p *Provider) signIn(ctx context.Context, email, pw, addr string) (token string, wait time.Duration, err error) {
	account, err := emailaddr.Canonical(email)
	if err != nil {
		return "", 0, err
	}
	settle, wait := p.throttle.attempt(account, addr)
	if wait > 0 {
		return "", wait, errThrottled
	}
	if !p.checks.acquire(ctx) {
		settle(attemptAborted)
		return "", time.Second, errBusy
	}
	u, ok, err := p.checkPassword(ctx, email, pw)
	p.checks.release()
	switch {
	case err != nil:
		settle(attemptAborted)
		return "", 0, err
	case !ok:
		settle(attemptFailed)
		return "", 0, errBadCredentials
	}
	settle(attemptSucceeded)
	s, err := p.cmds.Identity.StartSession(ctx, u.ID, p.opts.SessionTTL)
	if err != nil {
		return "", 0, err
	}
	token, err = p.keys.Sign(tokenClaims{Issuer: p.issuer, Subject: u.ID, Audience: sessionAudience, SessionID: s.ID,
		IssuedAt: s.StartedAt.Unix(), ExpiresAt: s.ExpiresAt.Unix()})
	return token, 0, err
}

// checkPassword reports whether pw is the password of the account with email.
func (p *Provider) checkPassword(ctx context.Context, email, pw string) (user.State, bool, error) {
	u, err := p.cmds.Identity.UserByEmail(ctx, email)
	hash := u.PasswordHash
	if err != nil {
		if !errors.Is(err, domain.ErrNotFound) {
			return u, false, err
		}
		hash = dummyHash()
	}
	ok, verr := password.Verify(hash, pw)
	return u, err == nil && verr == nil && ok, nil
}

// session returns the signed-in user of a browser request, from the session cookie.
func (p *Provider) session(r *http.Request) (Principal, bool) {
	c, err := r.Cookie(p.sessionCookie)
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
	c, err := r.Cookie(p.sessionCookie)
	if err != nil {
		return p.now()
	}
	claims, err := p.parse(r.Context(), c.Value, true)
	if err != nil {
		return p.now()
	}
	return unix(claims.IssuedAt)
}

// SessionCookieName is the name of the session cookie: __Host-sy_session on https.
func (p *Provider) SessionCookieName() string { return p.sessionCookie }

func (p *Provider) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: p.secure, SameSite: http.SameSiteLaxMode})
}

// A form's CSRF token is sealed (AES-GCM, under the service's secret key) with the session it
// belongs to as associated data: only this service can make one, and one made for a session
// opens for that session alone. Before sign-in the binding is the random value of the CSRF
// cookie instead. The token's plaintext is empty: all it carries is the proof.
func csrfAAD(binding string) []byte { return []byte("csrf\x00" + binding) }

// csrfBinding is what the request's forms are bound to: the session id of a valid session
// cookie, else the CSRF cookie's value ("" when there is none). Only the cookie's signature and
// expiry are checked: whether the session is live is the page's own check.
func (p *Provider) csrfBinding(r *http.Request) string {
	if c, err := r.Cookie(p.sessionCookie); err == nil && c.Value != "" {
		if claims, err := p.parse(r.Context(), c.Value, true); err == nil && claims.Audience == sessionAudience && claims.SessionID != "" {
			return "session:" + claims.SessionID
		}
	}
	if c, err := r.Cookie(p.csrfCookie); err == nil && len(c.Value) >= 32 {
		return "anonymous:" + c.Value
	}
	return ""
}

// csrfToken returns a CSRF token for the request's forms, setting the CSRF cookie first when
// there is neither a session nor one yet.
func (p *Provider) csrfToken(w http.ResponseWriter, r *http.Request) string {
	binding := p.csrfBinding(r)
	if binding == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		v := base64.RawURLEncoding.EncodeToString(b)
		p.setCookie(w, p.csrfCookie, v, 0)
		binding = "anonymous:" + v
	}
	token, err := p.opts.Sealer.Seal(nil, csrfAAD(binding))
	if err != nil {
		// No randomness: the form cannot be protected, so it will be refused.
		p.log.WithError(err).Error("csrf token")
		return ""
	}
	return token
}

// checkCSRF reports whether the parsed form's token was made by this service for the
// request's session (or, before sign-in, its CSRF cookie). GCM's tag check is constant time.
func (p *Provider) checkCSRF(r *http.Request) bool {
	binding, token := p.csrfBinding(r), r.PostFormValue(csrfField)
	if binding == "" || token == "" {
		return false
	}
	_, err := p.opts.Sealer.Open(token, csrfAAD(binding))
	return err == nil
}

// safeReturn keeps redirects after sign-in on this site: only an absolute path of this origin
// passes. Browsers drop tabs and newlines inside URLs and treat a backslash as a slash, so a
// value with any control, space or format character or a backslash (raw or percent-encoded), a
// scheme, a host, or a path that starts with two slashes (even once decoded) goes to the
// console's home instead.
func safeReturn(to string) string {
	const home = "/"
	if len(to) > 4096 || !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") || !plainText(to) {
		return home
	}
	u, err := url.Parse(to)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || !plainText(u.Path) {
		return home
	}
	return to
}

// plainText reports whether s is valid UTF-8 with only printable, non-space characters and no
// backslash.
func plainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if c == '\\' || unicode.IsSpace(c) || !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}

type loginData struct {
	CSRF, ReturnTo, Email, Error string
}

func (p *Provider) loginPage(w http.ResponseWriter, r *http.Request) {
	p.render(w, http.StatusOK, "login", "Sign in", loginData{CSRF: p.csrfToken(w, r), ReturnTo: safeReturn(r.URL.Query().Get("return_to"))})
}

func (p *Provider) loginSubmit(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !p.checkCSRF(r) {
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
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		data.Error = "Too many sign-ins are in progress. Try again in a moment."
		p.render(w, http.StatusServiceUnavailable, "login", "Sign in", data)
	case errors.Is(err, errBadCredentials):
		data.Error = "That email and password do not match an account."
		p.render(w, http.StatusUnauthorized, "login", "Sign in", data)
	case errors.As(err, new(*domain.ValidationError)):
		data.Error = "That is not an address an account can have: " + err.Error() + "."
		p.render(w, http.StatusBadRequest, "login", "Sign in", data)
	case err != nil:
		p.failPage(w, "sign in", err)
	default:
		p.setCookie(w, p.sessionCookie, token, int(p.opts.SessionTTL/time.Second))
		http.Redirect(w, r, ret, http.StatusSeeOther)
	}
}

func (p *Provider) logoutPage(w http.ResponseWriter, r *http.Request) {
	p.render(w, http.StatusOK, "logout", "Sign out", loginData{CSRF: p.csrfToken(w, r)})
}

func (p *Provider) logoutSubmit(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !p.checkCSRF(r) {
		p.errorPage(w, http.StatusForbidden, "This form has expired", "Go back, reload the page and try again.")
		return
	}
	if pr, ok := p.session(r); ok {
		if err := p.cmds.Identity.EndSession(r.Context(), pr.SessionID); err != nil {
			p.log.WithError(err).Error("sign out")
		}
	}
	p.setCookie(w, p.sessionCookie, "", -1)
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
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		apiError(w, http.StatusServiceUnavailable, "too many sign-ins in progress; retry shortly")
	case errors.Is(err, errBadCredentials):
		apiError(w, http.StatusUnauthorized, "invalid email or password")
	case err != nil:
		httperr.WriteErr(w, p.log, err) // 503 with Retry-After when the database is unreachable
	default:
		noStore(w)
		writeJSON(w, http.StatusOK, map[string]any{"token": token, "tokenType": "Bearer", "expiresIn": int64(p.opts.SessionTTL / time.Second)})
	}
}

// apiError writes the SPEC.md 7 body with the service's one error writer.
func apiError(w http.ResponseWriter, status int, msg string) { httperr.Write(w, status, msg) }
