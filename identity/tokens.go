package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/domain/authorization"
	"github.com/switchyard/switchyard/internal/dbfail"
	"github.com/switchyard/switchyard/web/bearer"
	"github.com/switchyard/switchyard/web/httperr"
)

// oauthError is an RFC 6749 5.2 error.
type oauthError struct {
	status      int
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func oauthErr(status int, code, desc string) *oauthError {
	return &oauthError{status: status, Code: code, Description: desc}
}

var (
	errInvalidClient = oauthErr(http.StatusUnauthorized, "invalid_client", "client authentication failed")
	errInvalidGrant  = oauthErr(http.StatusBadRequest, "invalid_grant", "the code or refresh token is invalid, expired, revoked or was issued to another client")
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Provider) writeOAuthError(w http.ResponseWriter, r *http.Request, err error) {
	var oe *oauthError
	switch {
	case errors.As(err, &oe):
	case dbfail.Unavailable(err):
		// RFC 6749 4.1.2.1's code for a server that cannot answer for now; the client may
		// send the same request again after Retry-After.
		p.log.WithError(err).WithField("path", r.URL.Path).Warn("oauth endpoint unavailable")
		w.Header().Set("Retry-After", httperr.UnavailableRetryAfter)
		oe = oauthErr(http.StatusServiceUnavailable, "temporarily_unavailable", httperr.UnavailableMessage)
	default:
		p.log.WithError(err).WithField("path", r.URL.Path).Error("oauth endpoint failed")
		oe = oauthErr(http.StatusInternalServerError, "server_error", "internal error")
	}
	noStore(w)
	if oe.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="switchyard", charset="UTF-8"`)
	}
	writeJSON(w, oe.status, oe)
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

// authenticateClient implements client_secret_basic, client_secret_post and none (public apps,
// which always use PKCE). The app must be live: a reverted app's secret is refused.
func (p *Provider) authenticateClient(r *http.Request) (app.State, error) {
	id, secret, basic := r.BasicAuth()
	if basic {
		var err1, err2 error
		// RFC 6749 2.3.1: both parts are form-urlencoded inside the Basic credentials.
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return app.State{}, errInvalidClient
		}
		if r.PostForm.Get("client_secret") != "" {
			return app.State{}, oauthErr(http.StatusBadRequest, "invalid_request", "use one client authentication method")
		}
		if fid := r.PostForm.Get("client_id"); fid != "" && fid != id {
			return app.State{}, errInvalidClient
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id == "" {
		return app.State{}, errInvalidClient
	}
	a, err := p.cmds.Apps.App(r.Context(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return app.State{}, errInvalidClient
	}
	if err != nil {
		return app.State{}, err
	}
	if !a.Live() {
		return app.State{}, errInvalidClient
	}
	if a.Public {
		if secret != "" {
			return app.State{}, errInvalidClient
		}
		return a, nil
	}
	if secret == "" || a.SecretHash == "" ||
		subtle.ConstantTimeCompare([]byte(authorization.HashToken(secret)), []byte(a.SecretHash)) != 1 {
		return app.State{}, errInvalidClient
	}
	return a, nil
}

// TokenResponse is the token endpoint's success body (RFC 6749 5.1, OIDC Core 3.1.3.3).
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	IDToken      string `json:"id_token,omitempty"`
	Scope        string `json:"scope"`
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		p.writeOAuthError(w, r, oauthErr(http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded"))
		return
	}
	client, err := p.authenticateClient(r)
	if err != nil {
		p.writeOAuthError(w, r, err)
		return
	}
	var resp TokenResponse
	switch gt := r.PostForm.Get("grant_type"); gt {
	case "authorization_code":
		resp, err = p.exchangeCode(r.Context(), client, r.PostForm)
	case "refresh_token":
		resp, err = p.exchangeRefresh(r.Context(), client, r.PostForm)
	case "":
		err = oauthErr(http.StatusBadRequest, "invalid_request", "grant_type is required")
	default:
		err = oauthErr(http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant_type %q is not supported", gt))
	}
	if err != nil {
		p.writeOAuthError(w, r, err)
		return
	}
	noStore(w)
	writeJSON(w, http.StatusOK, resp)
}

func (p *Provider) exchangeCode(ctx context.Context, client app.State, form url.Values) (TokenResponse, error) {
	code, verifier, redirect := form.Get("code"), form.Get("code_verifier"), form.Get("redirect_uri")
	if code == "" || verifier == "" || redirect == "" {
		return TokenResponse{}, oauthErr(http.StatusBadRequest, "invalid_request", "code, code_verifier and redirect_uri are required")
	}
	az, refresh, err := p.cmds.Apps.RedeemCode(ctx, commands.RedeemCode{Code: code, ClientID: client.ClientID, RedirectURI: redirect,
		Verifier: verifier, RefreshTTL: p.opts.RefreshTTL})
	if err != nil {
		return TokenResponse{}, grantError(err)
	}
	return p.issue(ctx, az, refresh, true)
}

func (p *Provider) exchangeRefresh(ctx context.Context, client app.State, form url.Values) (TokenResponse, error) {
	token := form.Get("refresh_token")
	if token == "" {
		return TokenResponse{}, oauthErr(http.StatusBadRequest, "invalid_request", "refresh_token is required")
	}
	requested := strings.Fields(form.Get("scope"))
	if len(requested) > 0 {
		// RFC 6749 6: checked before the refresh token is rotated, so a refused request leaves it usable.
		if err := p.checkRefreshScope(ctx, client.ClientID, token, requested); err != nil {
			return TokenResponse{}, err
		}
	}
	az, next, err := p.cmds.Apps.RefreshAuthorization(ctx, client.ClientID, token, p.opts.RefreshTTL)
	if err != nil {
		return TokenResponse{}, grantError(err)
	}
	if len(requested) > 0 {
		// The new tokens carry the narrower scope; the authorization (and so the next refresh
		// without a scope) keeps all its scopes.
		if err := within(requested, az.Scopes); err != nil {
			return TokenResponse{}, err
		}
		az.Scopes = requested
	}
	return p.issue(ctx, az, next, false)
}

// checkRefreshScope refuses a requested scope wider than the authorization the refresh token
// belongs to. A token that is not the client's is left to RefreshAuthorization's invalid_grant.
func (p *Provider) checkRefreshScope(ctx context.Context, clientID, token string, requested []string) error {
	id, ok := commands.AuthorizationOfToken(token)
	if !ok {
		return nil
	}
	az, err := p.cmds.Apps.Authorization(ctx, id)
	if err != nil || az.ClientID != clientID {
		return nil
	}
	return within(requested, az.Scopes)
}

// within is invalid_scope unless every requested scope was granted.
func within(requested, granted []string) error {
	for _, s := range requested {
		if !slices.Contains(granted, s) {
			return oauthErr(http.StatusBadRequest, "invalid_scope", fmt.Sprintf("scope %q was not granted; a refresh may only narrow the scope", s))
		}
	}
	return nil
}

func grantError(err error) error {
	if errors.Is(err, authorization.ErrInvalidGrant) || errors.Is(err, domain.ErrNotFound) {
		return errInvalidGrant
	}
	return err
}

// issue signs the access token and, when openid was granted, the ID token. Both are signed on
// every grant: the refresh response carries a fresh ID token too (OIDC Core 12.2 allows it).
func (p *Provider) issue(ctx context.Context, az authorization.State, refresh string, withNonce bool) (TokenResponse, error) {
	now := p.now()
	access, err := p.keys.Sign(p.accessClaims(az, now))
	if err != nil {
		return TokenResponse{}, err
	}
	resp := TokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(p.opts.AccessTTL / time.Second),
		RefreshToken: refresh, Scope: strings.Join(az.Scopes, " ")}
	if az.HasScope(ScopeOpenID) {
		c := tokenClaims{Issuer: p.issuer, Subject: az.UserID, Audience: az.ClientID, Azp: az.ClientID,
			IssuedAt: now.Unix(), ExpiresAt: now.Add(p.opts.IDTokenTTL).Unix(), AuthTime: az.AuthTime.Unix(), AtHash: atHash(access)}
		if withNonce {
			// The nonce belongs to the authentication request: only the code's ID token repeats it.
			c.Nonce = az.Nonce
		}
		if az.HasScope(ScopeEmail) || az.HasScope(ScopeProfile) {
			u, err := p.cmds.Identity.User(ctx, az.UserID)
			if err != nil {
				return TokenResponse{}, err
			}
			if az.HasScope(ScopeEmail) {
				f := false
				c.Email, c.EmailVerified = u.Email, &f
			}
			if az.HasScope(ScopeProfile) {
				c.Name = u.Name
			}
		}
		if resp.IDToken, err = p.keys.Sign(c); err != nil {
			return TokenResponse{}, err
		}
	}
	return resp, nil
}

func (p *Provider) accessClaims(az authorization.State, now time.Time) tokenClaims {
	return tokenClaims{Issuer: p.issuer, Subject: az.UserID, Audience: az.ClientID, ClientID: az.ClientID,
		WorkspaceID: az.WorkspaceID, Scope: strings.Join(az.Scopes, " "), IssuedAt: now.Unix(),
		ExpiresAt: now.Add(p.opts.AccessTTL).Unix(), ID: newJTI(az.ID)}
}

// newJTI names the authorization in the token id, "<authorization id>.<random>", so a resource
// check finds the authorization (and its revocation) without another claim.
func newJTI(authorizationID string) string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return authorizationID + "." + base64.RawURLEncoding.EncodeToString(b)
}

// atHash is OIDC Core 3.1.3.6: the left half of SHA-256 of the access token, base64url.
func atHash(accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// Principal is who a verified bearer token speaks for (web/bearer, which the /v1 API reads it
// from without importing the provider).
type Principal = bearer.Principal

// ErrInvalidToken is any reason a bearer token is refused (SPEC.md 7: 401).
var ErrInvalidToken = bearer.ErrInvalidToken

func (p *Provider) parse(ctx context.Context, raw string, validate bool) (tokenClaims, error) {
	var c tokenClaims
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(p.issuer), jwt.WithTimeFunc(p.now)}
	if validate {
		opts = append(opts, jwt.WithExpirationRequired())
	} else {
		opts = append(opts, jwt.WithoutClaimsValidation())
	}
	if _, err := jwt.ParseWithClaims(raw, &c, p.keys.Keyfunc(ctx), opts...); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if !validate && c.Issuer != p.issuer {
		return c, fmt.Errorf("%w: issuer", ErrInvalidToken)
	}
	return c, nil
}

// VerifyBearer checks a bearer token: RS256 signature against the ring's keys, issuer, expiry,
// and, looked up in the event store so that it takes effect at once, that the authorization
// (or session) behind it is not revoked and the app is still live. ErrInvalidToken otherwise.
func (p *Provider) VerifyBearer(ctx context.Context, raw string) (Principal, error) {
	c, err := p.parse(ctx, raw, true)
	if err != nil {
		return Principal{}, err
	}
	if c.Audience == sessionAudience {
		if c.SessionID == "" {
			return Principal{}, fmt.Errorf("%w: no session", ErrInvalidToken)
		}
		s, err := p.cmds.Identity.Session(ctx, c.SessionID)
		if err != nil || !s.Active(p.now()) || s.UserID != c.Subject {
			return Principal{}, fmt.Errorf("%w: session ended", ErrInvalidToken)
		}
		return Principal{Session: true, UserID: c.Subject, SessionID: c.SessionID, ExpiresAt: unix(c.ExpiresAt)}, nil
	}
	if c.ClientID == "" || c.WorkspaceID == "" || c.Audience != c.ClientID || c.ID == "" {
		return Principal{}, fmt.Errorf("%w: not an access token", ErrInvalidToken)
	}
	azID, _, _ := strings.Cut(c.ID, ".")
	az, err := p.cmds.Apps.Authorization(ctx, azID)
	if errors.Is(err, domain.ErrNotFound) {
		return Principal{}, fmt.Errorf("%w: unknown authorization", ErrInvalidToken)
	}
	if err != nil {
		return Principal{}, err
	}
	if az.Revoked || az.ClientID != c.ClientID || az.WorkspaceID != c.WorkspaceID || az.UserID != c.Subject {
		return Principal{}, fmt.Errorf("%w: authorization revoked", ErrInvalidToken)
	}
	a, err := p.cmds.Apps.App(ctx, c.ClientID)
	if err != nil || !a.Live() {
		return Principal{}, fmt.Errorf("%w: app is not live", ErrInvalidToken)
	}
	return Principal{UserID: c.Subject, ClientID: c.ClientID, WorkspaceID: c.WorkspaceID, Scopes: strings.Fields(c.Scope),
		AuthorizationID: az.ID, ExpiresAt: unix(c.ExpiresAt)}, nil
}

func (p *Provider) userinfo(w http.ResponseWriter, r *http.Request) {
	raw, _ := bearer.Token(r)
	if raw == "" && r.Method == http.MethodPost {
		_ = r.ParseForm()
		raw = r.PostForm.Get("access_token")
	}
	pr, err := p.VerifyBearer(r.Context(), raw)
	if err == nil && (pr.Session || !access.Satisfies(pr.Scopes, ScopeOpenID)) {
		err = ErrInvalidToken
	}
	if dbfail.Unavailable(err) {
		p.writeOAuthError(w, r, err)
		return
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidToken) {
			p.log.WithError(err).Error("userinfo")
		}
		noStore(w)
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard", error="invalid_token", error_description="the access token is missing, invalid, expired or revoked"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token"})
		return
	}
	u, err := p.cmds.Identity.User(r.Context(), pr.UserID)
	if err != nil {
		p.writeOAuthError(w, r, err)
		return
	}
	out := map[string]any{"sub": u.ID}
	if access.Satisfies(pr.Scopes, ScopeEmail) {
		out["email"], out["email_verified"] = u.Email, false
	}
	if access.Satisfies(pr.Scopes, ScopeProfile) {
		out["name"] = u.Name
	}
	noStore(w)
	writeJSON(w, http.StatusOK, out)
}

// revoke is RFC 7009. Revoking a refresh token, or an access token, revokes the authorization
// behind it: its refresh chain and every access token issued from it. Unknown tokens, and tokens
// of another client, answer 200 and change nothing.
func (p *Provider) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		p.writeOAuthError(w, r, oauthErr(http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded"))
		return
	}
	client, err := p.authenticateClient(r)
	if err != nil {
		p.writeOAuthError(w, r, err)
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		p.writeOAuthError(w, r, oauthErr(http.StatusBadRequest, "invalid_request", "token is required"))
		return
	}
	if azID, ok := p.authorizationOf(r.Context(), token, client.ClientID); ok {
		if err := p.cmds.Apps.RevokeAuthorization(r.Context(), azID, authorization.ReasonClient); err != nil {
			p.writeOAuthError(w, r, err)
			return
		}
	}
	noStore(w)
	w.WriteHeader(http.StatusOK)
}

// authorizationOf finds the authorization of clientID that token (a refresh token or an access
// token signed by the ring, expired or not) belongs to.
func (p *Provider) authorizationOf(ctx context.Context, token, clientID string) (string, bool) {
	if id, ok := commands.AuthorizationOfToken(token); ok {
		az, err := p.cmds.Apps.Authorization(ctx, id)
		if err != nil || az.ClientID != clientID || !az.OwnsRefresh(authorization.HashToken(token)) {
			return "", false
		}
		return id, true
	}
	c, err := p.parse(ctx, token, false)
	if err != nil || c.ClientID != clientID || c.Audience != clientID {
		return "", false
	}
	id, _, _ := strings.Cut(c.ID, ".")
	return id, id != ""
}

// introspect is RFC 7662. Only a confidential client (authenticated with its secret) may ask,
// and only about its own tokens: any other token, like an unknown one, is {"active": false}, so
// the endpoint tells no one about another app's users, workspaces or scopes.
func (p *Provider) introspect(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		p.writeOAuthError(w, r, oauthErr(http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded"))
		return
	}
	client, err := p.authenticateClient(r)
	if err == nil && client.Public {
		err = errInvalidClient
	}
	if err != nil {
		p.writeOAuthError(w, r, err)
		return
	}
	noStore(w)
	writeJSON(w, http.StatusOK, p.introspection(r.Context(), client.ClientID, r.PostForm.Get("token")))
}

// introspection is the RFC 7662 answer about token for clientID.
func (p *Provider) introspection(ctx context.Context, clientID, token string) map[string]any {
	inactive := map[string]any{"active": false}
	if id, ok := commands.AuthorizationOfToken(token); ok {
		az, err := p.cmds.Apps.Authorization(ctx, id)
		h := authorization.HashToken(token)
		if err != nil || az.ClientID != clientID || az.Revoked || az.RefreshHash == "" ||
			subtle.ConstantTimeCompare([]byte(az.RefreshHash), []byte(h)) != 1 || !p.now().Before(az.RefreshExpiresAt) {
			return inactive
		}
		return map[string]any{"active": true, "token_type": "refresh_token", "client_id": az.ClientID,
			"sub": az.UserID, "scope": strings.Join(az.Scopes, " "), "workspace_id": az.WorkspaceID, "exp": az.RefreshExpiresAt.Unix(),
			"iss": p.issuer}
	}
	pr, err := p.VerifyBearer(ctx, token)
	if err != nil || pr.Session || pr.ClientID != clientID {
		return inactive
	}
	return map[string]any{"active": true, "token_type": "Bearer", "client_id": pr.ClientID, "aud": pr.ClientID,
		"sub": pr.UserID, "scope": strings.Join(pr.Scopes, " "), "workspace_id": pr.WorkspaceID, "exp": pr.ExpiresAt.Unix(), "iss": p.issuer}
}
