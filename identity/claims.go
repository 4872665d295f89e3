package identity

import (
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Scope names the service's own endpoints check (SPEC.md 5 rule 7).
const (
	ScopeOpenID         = "openid"
	ScopeProfile        = "profile"
	ScopeEmail          = "email"
	ScopeWorkspaceRead  = "workspace:read"
	ScopeReadBilling    = "workspace:read.billing"
	ScopeAPIKeys        = "workspace:api_keys"
	ScopeWorkspaceAdmin = "workspace:admin"
)

// Satisfies reports whether granted scopes allow an action that needs required:
// workspace:admin satisfies every workspace scope (SPEC.md 4.9).
func Satisfies(granted []string, required string) bool {
	if slices.Contains(granted, required) {
		return true
	}
	return strings.HasPrefix(required, "workspace:") && slices.Contains(granted, ScopeWorkspaceAdmin)
}

// sessionAudience marks a session JWT (the dashboard's bearer token and the sign-in cookie),
// so it can never pass for an access token of an app.
const sessionAudience = "switchyard:session"

// tokenClaims is the payload of every JWT the service signs. Access tokens carry exactly the
// SPEC.md 2.11 claims plus iss and jti; ID tokens the OIDC Core 2 claims; session tokens sid.
// aud is one string (never an array), as SPEC.md 2.11 shows it.
type tokenClaims struct {
	Issuer      string `json:"iss"`
	Subject     string `json:"sub"`
	Audience    string `json:"aud"`
	ClientID    string `json:"client_id,omitempty"`
	WorkspaceID string `json:"workspace_id,omitempty"`
	Scope       string `json:"scope,omitempty"`
	IssuedAt    int64  `json:"iat"`
	ExpiresAt   int64  `json:"exp"`
	ID          string `json:"jti,omitempty"`

	// ID token claims.
	AuthTime      int64  `json:"auth_time,omitempty"`
	Nonce         string `json:"nonce,omitempty"`
	AtHash        string `json:"at_hash,omitempty"`
	Azp           string `json:"azp,omitempty"`
	Email         string `json:"email,omitempty"`
	EmailVerified *bool  `json:"email_verified,omitempty"`
	Name          string `json:"name,omitempty"`

	// Session token claim.
	SessionID string `json:"sid,omitempty"`
}

func numeric(v int64) *jwt.NumericDate {
	if v == 0 {
		return nil
	}
	return &jwt.NumericDate{Time: unix(v)}
}

// The jwt.Claims interface, for golang-jwt's validation of exp, iat, iss and aud.
func (c tokenClaims) GetExpirationTime() (*jwt.NumericDate, error) { return numeric(c.ExpiresAt), nil }
func (c tokenClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return numeric(c.IssuedAt), nil }
func (c tokenClaims) GetNotBefore() (*jwt.NumericDate, error)      { return nil, nil }
func (c tokenClaims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c tokenClaims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c tokenClaims) GetAudience() (jwt.ClaimStrings, error) {
	return jwt.ClaimStrings{c.Audience}, nil
}
