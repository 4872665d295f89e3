// Package authorization is the OAuth authorization aggregate: one user's consent to one app for
// one workspace (SPEC.md 2.12), the authorization code it was granted with, and its refresh-token
// chain. Codes and refresh tokens are recorded only as SHA-256 hashes. The noun is
// "authorization" in every layer (events, streams, commands, read model, routes); the token
// endpoint's "grants" are OAuth's grant types.
package authorization

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of authorizations: authorization-<id>.
const Category = "authorization"

// Errors of the token endpoint's grants. ErrReplay means a used code or a rotated refresh token
// came back: the credential leaked or was replayed, so the whole authorization must be revoked.
var (
	ErrInvalidGrant = errors.New("invalid grant")
	ErrReplay       = errors.New("credential replayed")
)

// Granted records a consent and the authorization code issued for it.
type Granted struct {
	ID            string    `json:"id"`
	UserID        string    `json:"userId"`
	ClientID      string    `json:"clientId"`
	WorkspaceID   string    `json:"workspaceId"`
	Scopes        []string  `json:"scopes"`
	CodeHash      string    `json:"codeHash"`
	CodeChallenge string    `json:"codeChallenge"`
	RedirectURI   string    `json:"redirectUri"`
	Nonce         string    `json:"nonce,omitempty"`
	AuthTime      time.Time `json:"authTime"`
	CodeExpiresAt time.Time `json:"codeExpiresAt"`
	At            time.Time `json:"at"`
}

// CodeRedeemed records the code's single use and the first refresh token of the chain.
type CodeRedeemed struct {
	ID               string    `json:"id"`
	RefreshHash      string    `json:"refreshHash"`
	RefreshExpiresAt time.Time `json:"refreshExpiresAt"`
	At               time.Time `json:"at"`
}

// RefreshRotated replaces the current refresh token by a new one.
type RefreshRotated struct {
	ID               string    `json:"id"`
	PreviousHash     string    `json:"previousHash"`
	RefreshHash      string    `json:"refreshHash"`
	RefreshExpiresAt time.Time `json:"refreshExpiresAt"`
	At               time.Time `json:"at"`
}

// Revoked ends the authorization: its refresh token and every access token issued from it.
type Revoked struct {
	ID     string    `json:"id"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// EventType names the events in the log.
func (Granted) EventType() string        { return "AuthorizationGranted" }
func (CodeRedeemed) EventType() string   { return "AuthorizationCodeRedeemed" }
func (RefreshRotated) EventType() string { return "AuthorizationRefreshRotated" }
func (Revoked) EventType() string        { return "AuthorizationRevoked" }

func init() { domain.Events.Register(Granted{}, CodeRedeemed{}, RefreshRotated{}, Revoked{}) }

// Revocation reasons recorded by the service itself.
const (
	ReasonUser        = "revoked by user"
	ReasonClient      = "revoked by client"
	ReasonCodeReuse   = "authorization code reused"
	ReasonRefreshUse  = "rotated refresh token reused"
	ReasonSuperseded  = "superseded by a new consent"
	ReasonAppReverted = "app reverted"
)

// State is an authorization folded from its stream.
type State struct {
	Exists           bool
	ID               string
	UserID           string
	ClientID         string
	WorkspaceID      string
	Scopes           []string
	CodeHash         string
	CodeChallenge    string
	RedirectURI      string
	Nonce            string
	AuthTime         time.Time
	CodeExpiresAt    time.Time
	CodeRedeemed     bool
	RefreshHash      string
	RefreshExpiresAt time.Time
	Rotated          []string // hashes of refresh tokens that were rotated away
	GrantedAt        time.Time
	LastUsedAt       time.Time
	Revoked          bool
	RevokedAt        time.Time
	RevokeReason     string
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Granted:
		return State{Exists: true, ID: ev.ID, UserID: ev.UserID, ClientID: ev.ClientID, WorkspaceID: ev.WorkspaceID,
			Scopes: ev.Scopes, CodeHash: ev.CodeHash, CodeChallenge: ev.CodeChallenge, RedirectURI: ev.RedirectURI,
			Nonce: ev.Nonce, AuthTime: ev.AuthTime, CodeExpiresAt: ev.CodeExpiresAt, GrantedAt: ev.At}
	case CodeRedeemed:
		s.CodeRedeemed, s.RefreshHash, s.RefreshExpiresAt, s.LastUsedAt = true, ev.RefreshHash, ev.RefreshExpiresAt, ev.At
	case RefreshRotated:
		// A fresh slice: states are shared by the command cache and must never alias.
		s.Rotated = append(slices.Clip(s.Rotated), ev.PreviousHash)
		s.RefreshHash, s.RefreshExpiresAt, s.LastUsedAt = ev.RefreshHash, ev.RefreshExpiresAt, ev.At
	case Revoked:
		s.Revoked, s.RevokedAt, s.RevokeReason, s.RefreshHash = true, ev.At, ev.Reason, ""
	}
	return s
}

// HasScope reports whether the authorization granted scope.
func (s State) HasScope(scope string) bool { return slices.Contains(s.Scopes, scope) }

// HashToken is the hex SHA-256 under which codes and refresh tokens are recorded. The tokens
// carry 256 random bits, so a fast hash is enough: there is nothing to brute-force.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// S256 is the PKCE code challenge of a verifier (RFC 7636 4.2).
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// ValidVerifier checks the RFC 7636 4.1 syntax: 43 to 128 unreserved characters.
func ValidVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, c := range []byte(v) {
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
		if !ok {
			return false
		}
	}
	return true
}

// Grant is the command to record a consent with its code.
type Grant struct {
	ID, UserID, ClientID, WorkspaceID string
	Scopes                            []string
	CodeHash, CodeChallenge           string
	RedirectURI, Nonce                string
	AuthTime                          time.Time
	CodeTTL                           time.Duration
}

// DecideGrant records the consent once.
func DecideGrant(s State, c Grant, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if c.UserID == "" || c.ClientID == "" || c.WorkspaceID == "" || c.CodeHash == "" || c.RedirectURI == "" {
		return nil, domain.Invalid("authorization", "user, client, workspace, code and redirect URI are required")
	}
	if len(c.CodeChallenge) != 43 {
		return nil, domain.Invalid("code_challenge", "must be an S256 challenge")
	}
	now = now.UTC()
	return []domain.Event{Granted{ID: c.ID, UserID: c.UserID, ClientID: c.ClientID, WorkspaceID: c.WorkspaceID,
		Scopes: slices.Clone(c.Scopes), CodeHash: c.CodeHash, CodeChallenge: c.CodeChallenge, RedirectURI: c.RedirectURI,
		Nonce: c.Nonce, AuthTime: c.AuthTime.UTC(), CodeExpiresAt: now.Add(c.CodeTTL), At: now}}, nil
}

// Redeem is the command to exchange the code.
type Redeem struct {
	CodeHash, ClientID, RedirectURI, Verifier string
	RefreshHash                               string
	RefreshTTL                                time.Duration
}

// DecideRedeem exchanges the code for the first refresh token. A code that was already used is
// ErrReplay (the caller revokes the authorization); every other failure is ErrInvalidGrant and
// leaves the code as it was.
func DecideRedeem(s State, c Redeem, now time.Time) ([]domain.Event, error) {
	if !s.Exists || s.ClientID != c.ClientID || !equal(s.CodeHash, c.CodeHash) {
		return nil, ErrInvalidGrant
	}
	if s.Revoked {
		return nil, ErrInvalidGrant
	}
	if s.CodeRedeemed {
		return nil, ErrReplay
	}
	if !now.Before(s.CodeExpiresAt) || s.RedirectURI != c.RedirectURI || !ValidVerifier(c.Verifier) ||
		!equal(S256(c.Verifier), s.CodeChallenge) {
		return nil, ErrInvalidGrant
	}
	now = now.UTC()
	return []domain.Event{CodeRedeemed{ID: s.ID, RefreshHash: c.RefreshHash, RefreshExpiresAt: now.Add(c.RefreshTTL), At: now}}, nil
}

// DecideRefresh rotates the refresh token with hash presented. A token rotated away earlier is
// ErrReplay (the caller revokes the chain).
func DecideRefresh(s State, clientID, presented, next string, ttl time.Duration, now time.Time) ([]domain.Event, error) {
	if !s.Exists || s.ClientID != clientID || s.Revoked {
		return nil, ErrInvalidGrant
	}
	if s.RefreshHash != "" && equal(s.RefreshHash, presented) {
		if !now.Before(s.RefreshExpiresAt) {
			return nil, ErrInvalidGrant
		}
		now = now.UTC()
		return []domain.Event{RefreshRotated{ID: s.ID, PreviousHash: presented, RefreshHash: next, RefreshExpiresAt: now.Add(ttl), At: now}}, nil
	}
	if slices.Contains(s.Rotated, presented) {
		return nil, ErrReplay
	}
	return nil, ErrInvalidGrant
}

// OwnsRefresh reports whether presented is the current or an earlier refresh token of s.
func (s State) OwnsRefresh(presented string) bool {
	return (s.RefreshHash != "" && equal(s.RefreshHash, presented)) || slices.Contains(s.Rotated, presented)
}

// DecideRevoke revokes the authorization; revoking it again changes nothing.
func DecideRevoke(s State, reason string, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	if s.Revoked {
		return nil, nil
	}
	return []domain.Event{Revoked{ID: s.ID, Reason: reason, At: now.UTC()}}, nil
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
