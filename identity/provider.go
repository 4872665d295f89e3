// Package identity is Switchyard's OpenID Connect provider (SPEC.md 4.10, 5 rules 5 to 8):
// signing keys and JWKS, discovery, sign-in with sessions and CSRF-protected forms, the
// authorize flow (sign-in, workspace picker, consent), the token, userinfo, revocation and
// introspection endpoints, and the verification of bearer tokens for the workspace endpoints.
// Decisions SPEC.md leaves open are written down in docs/identity.md.
package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/internal/configcheck"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/seal"
)

// Default lifetimes (SPEC.md 8 leaves them open; docs/identity.md).
const (
	DefaultAccessTTL  = 15 * time.Minute
	DefaultIDTokenTTL = 15 * time.Minute
	DefaultRefreshTTL = 30 * 24 * time.Hour
	DefaultSessionTTL = 12 * time.Hour
	DefaultCodeTTL    = 60 * time.Second
	// DefaultKeyReload is how often a process rereads the signing keys.
	DefaultKeyReload = 30 * time.Second
	// DefaultPasswordChecks is how many argon2id checks run at once (4 × 64 MiB).
	DefaultPasswordChecks = 4
	// DefaultPasswordCheckWait is how long a sign-in waits for a check slot before a 503.
	DefaultPasswordCheckWait = 5 * time.Second
)

// Config configures a Provider.
type Config struct {
	// Issuer is the base URL, byte-exact in every token and document; required.
	Issuer string
	// Cmds, Queries and Sealer (which seals the signing keys) are required.
	Cmds    *commands.Commands
	Queries *projections.Queries
	Sealer  *seal.Sealer
	// Logger receives internal failures; default logrus.StandardLogger().
	Logger logrus.FieldLogger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// AccessTTL, IDTokenTTL, RefreshTTL and SessionTTL are the lifetimes of the tokens and of a
	// browser session; CodeTTL that of an authorization code; KeyReload how often the signing
	// keys are reread. Zero takes the Default constant of each.
	AccessTTL, IDTokenTTL, RefreshTTL, SessionTTL time.Duration
	CodeTTL, KeyReload                            time.Duration
	// Throttle limits failed sign-ins; zero values take the defaults.
	Throttle ThrottleConfig
	// PasswordChecks bounds the argon2id checks (64 MiB each) running at once; default
	// DefaultPasswordChecks. A sign-in that finds no slot within PasswordCheckWait (default
	// DefaultPasswordCheckWait) is answered 503 with Retry-After.
	PasswordChecks    int
	PasswordCheckWait time.Duration
}

func (c *Config) setDefaults() {
	c.Issuer = strings.TrimRight(c.Issuer, "/")
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	configcheck.SetDefaults(c.durations(), false)
	if c.PasswordChecks == 0 {
		c.PasswordChecks = DefaultPasswordChecks
	}
	c.Throttle.setDefaults()
}

func (c *Config) durations() []configcheck.Duration {
	return []configcheck.Duration{{Name: "AccessTTL", Value: &c.AccessTTL, Default: DefaultAccessTTL},
		{Name: "IDTokenTTL", Value: &c.IDTokenTTL, Default: DefaultIDTokenTTL},
		{Name: "RefreshTTL", Value: &c.RefreshTTL, Default: DefaultRefreshTTL},
		{Name: "SessionTTL", Value: &c.SessionTTL, Default: DefaultSessionTTL},
		{Name: "CodeTTL", Value: &c.CodeTTL, Default: DefaultCodeTTL},
		{Name: "KeyReload", Value: &c.KeyReload, Default: DefaultKeyReload},
		{Name: "PasswordCheckWait", Value: &c.PasswordCheckWait, Default: DefaultPasswordCheckWait}}
}

// Validate reports a missing dependency or the first field out of range, by name. Zero values
// are valid: they take the default.
func (c Config) Validate() error {
	switch {
	case c.Issuer == "":
		return errors.New("identity: Issuer is required")
	case c.Cmds == nil:
		return errors.New("identity: Cmds is required")
	case c.Queries == nil:
		return errors.New("identity: Queries is required")
	case c.Sealer == nil:
		return errors.New("identity: Sealer is required")
	case c.PasswordChecks < 0:
		return fmt.Errorf("identity: PasswordChecks %d: must be at least 1 (0 takes the default)", c.PasswordChecks)
	}
	if err := configcheck.NotNegative("identity", c.durations()); err != nil {
		return err
	}
	return c.Throttle.Validate()
}

// Provider is the OpenID Connect provider.
type Provider struct {
	opts     Config
	issuer   string
	cmds     *commands.Commands
	queries  *projections.Queries
	log      logrus.FieldLogger
	now      func() time.Time
	keys     *KeyRing
	throttle *throttle
	checks   *gate // bounds concurrent argon2id checks
	secure   bool  // cookies carry Secure (an https issuer)
	// sessionCookie and csrfCookie are the cookie names: with the __Host- prefix on https.
	sessionCookie, csrfCookie string
	pages                     *pages
}

// New builds a provider; call Start (or Keys().EnsureKey) before serving.
func New(o Config) (*Provider, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	pg, err := loadPages()
	if err != nil {
		return nil, err
	}
	p := &Provider{opts: o, issuer: o.Issuer, cmds: o.Cmds, queries: o.Queries, log: o.Logger, now: o.Now,
		throttle: newThrottle(o.Throttle, o.Now), checks: newGate(o.PasswordChecks, o.PasswordCheckWait), secure: strings.HasPrefix(o.Issuer, "https://"), pages: pg}
	p.sessionCookie, p.csrfCookie = SessionCookie, CSRFCookie
	if p.secure {
		p.sessionCookie, p.csrfCookie = SecureCookiePrefix+SessionCookie, SecureCookiePrefix+CSRFCookie
	}
	// A retired key stays published while any token it signed can be live.
	publishFor := max(o.AccessTTL, o.IDTokenTTL, o.SessionTTL)
	p.keys = newKeyRing(o.Cmds, o.Queries, o.Sealer, o.Now, publishFor)
	return p, nil
}

// Keys is the provider's signing key ring.
func (p *Provider) Keys() *KeyRing { return p.keys }

// Issuer is the issuer identifier.
func (p *Provider) Issuer() string { return p.issuer }

// Start loads the signing keys, creating the first one when there is none.
func (p *Provider) Start(ctx context.Context) error { return p.keys.EnsureKey(ctx) }

// Run rereads the signing keys periodically until ctx ends, so keys rotated by another process
// are published here too.
func (p *Provider) Run(ctx context.Context) error {
	t := time.NewTicker(p.opts.KeyReload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := p.keys.Reload(ctx); err != nil && ctx.Err() == nil {
				p.log.WithError(err).Warn("reload signing keys")
			}
		}
	}
}

// Mount adds the provider's routes: the OIDC endpoints and pages at the root, the session
// sign-in for the console's JSON endpoints under v1 (the console mounts its own pages).
func (p *Provider) Mount(root, v1 *mux.Router) {
	root.HandleFunc("/.well-known/openid-configuration", p.discovery).Methods(http.MethodGet, http.MethodHead)
	root.HandleFunc("/.well-known/jwks.json", p.jwks).Methods(http.MethodGet, http.MethodHead)
	root.HandleFunc("/oauth/authorize", p.authorize).Methods(http.MethodGet, http.MethodPost)
	root.HandleFunc("/oauth/token", p.token).Methods(http.MethodPost)
	root.HandleFunc("/oauth/userinfo", p.userinfo).Methods(http.MethodGet, http.MethodPost)
	root.HandleFunc("/oauth/revoke", p.revoke).Methods(http.MethodPost)
	root.HandleFunc("/oauth/introspect", p.introspect).Methods(http.MethodPost)
	root.HandleFunc("/login", p.loginPage).Methods(http.MethodGet, http.MethodHead)
	root.HandleFunc("/login", p.loginSubmit).Methods(http.MethodPost)
	root.HandleFunc("/logout", p.logoutPage).Methods(http.MethodGet)
	root.HandleFunc("/logout", p.logoutSubmit).Methods(http.MethodPost)
	root.Handle("/static/{file}", staticHandler()).Methods(http.MethodGet, http.MethodHead)
	v1.HandleFunc("/auth/login", p.apiLogin).Methods(http.MethodPost)
}

// Discovery is the OpenID Provider Metadata document.
type Discovery struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	UserinfoEndpoint                  string   `json:"userinfo_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	IntrospectionEndpoint             string   `json:"introspection_endpoint"`
	EndSessionEndpoint                string   `json:"end_session_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	ResponseModesSupported            []string `json:"response_modes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	SubjectTypesSupported             []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported  []string `json:"id_token_signing_alg_values_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethods     []string `json:"revocation_endpoint_auth_methods_supported"`
	IntrospectionEndpointAuthMethods  []string `json:"introspection_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ClaimsSupported                   []string `json:"claims_supported"`
	PromptValuesSupported             []string `json:"prompt_values_supported"`
	AuthorizationResponseISSSupported bool     `json:"authorization_response_iss_parameter_supported"`
	RequestParameterSupported         bool     `json:"request_parameter_supported"`
	ClaimsParameterSupported          bool     `json:"claims_parameter_supported"`
}

var authMethods = []string{"client_secret_basic", "client_secret_post", "none"}

// Discovery returns the provider's metadata.
func (p *Provider) Discovery() Discovery {
	return Discovery{
		Issuer:                            p.issuer,
		AuthorizationEndpoint:             p.issuer + "/oauth/authorize",
		TokenEndpoint:                     p.issuer + "/oauth/token",
		UserinfoEndpoint:                  p.issuer + "/oauth/userinfo",
		JWKSURI:                           p.issuer + "/.well-known/jwks.json",
		RevocationEndpoint:                p.issuer + "/oauth/revoke",
		IntrospectionEndpoint:             p.issuer + "/oauth/introspect",
		EndSessionEndpoint:                p.issuer + "/logout",
		ScopesSupported:                   app.ScopeNames(),
		ResponseTypesSupported:            []string{"code"},
		ResponseModesSupported:            []string{"query"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token"},
		SubjectTypesSupported:             []string{"public"},
		IDTokenSigningAlgValuesSupported:  []string{"RS256"},
		TokenEndpointAuthMethodsSupported: authMethods,
		RevocationEndpointAuthMethods:     authMethods,
		IntrospectionEndpointAuthMethods:  authMethods,
		CodeChallengeMethodsSupported:     []string{"S256"},
		ClaimsSupported: []string{"iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "at_hash", "azp",
			"email", "email_verified", "name", "client_id", "workspace_id", "scope", "jti"},
		PromptValuesSupported:             []string{"none", "login", "consent"},
		AuthorizationResponseISSSupported: true,
	}
}

func (p *Provider) discovery(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, p.Discovery())
}

func (p *Provider) jwks(w http.ResponseWriter, r *http.Request) {
	// Short caching: a rotated key must reach verifiers quickly (they also refetch on an
	// unknown kid).
	w.Header().Set("Cache-Control", "public, max-age=60")
	writeJSON(w, http.StatusOK, map[string]any{"keys": p.keys.JWKS()})
}

func unix(v int64) time.Time { return time.Unix(v, 0).UTC() }

func wrapf(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
