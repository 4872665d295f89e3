package identity

import (
	"github.com/golang-jwt/jwt/v5"

	"github.com/switchyard/switchyard/domain/access"
)

// Scope names, from domain/access (where the rules about them live).
const (
	ScopeOpenID         = access.ScopeOpenID
	ScopeProfile        = access.ScopeProfile
	ScopeEmail          = access.ScopeEmail
	ScopeWorkspaceRead  = access.ScopeWorkspaceRead
	ScopeReadBilling    = access.ScopeReadBilling
	ScopeAPIKeys        = access.ScopeAPIKeys
	ScopeWorkspaceAdmin = access.ScopeWorkspaceAdmin
)

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
