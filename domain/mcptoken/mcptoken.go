// Package mcptoken is the MCP token aggregate: the credential of the /v1/mcp endpoint (SPEC.md
// 1 and 5, header X-Mcp-Token). A token belongs to one workspace and acts on it alone. As with
// API keys, the stream keeps only the SHA-256 of the token: the token itself is handed out once
// and never recorded.
//
// A token reads "mcp_" + the token id (a UUID, 36 characters) + "_" + 64 hex digits of random
// bytes. The id is embedded so the server folds the token's stream directly, with no read-model
// lag and no lookup by secret value; the random part is what makes the token unguessable.
package mcptoken

import (
	"crypto/sha256"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of MCP tokens: mcptoken-<id>.
const Category = "mcptoken"

// Shape of a token.
const (
	// Prefix starts every token, so a leaked one is recognisable (secret scanners, logs).
	Prefix = "mcp_"
	// RandomBytes is how much randomness a token carries.
	RandomBytes = domain.TokenRandomBytes
)

// Length is the length of every token.
var Length = domain.TokenLength(Prefix)

// Limits on what a token record may carry.
const (
	MaxLabelLength  = 200
	MaxReasonLength = 500
)

// ErrMalformed means a string does not have the shape of a token.
var ErrMalformed = errors.New("malformed MCP token")

// Minted records a new token. Hash is the hex SHA-256 of the whole token.
type Minted struct {
	ID          string     `json:"id"`
	WorkspaceID string     `json:"workspaceId"`
	Label       string     `json:"label"`
	Hash        string     `json:"hash"`
	CreatedAt   time.Time  `json:"createdAt"`
	ExpiresAt   *time.Time `json:"expiresAt"`
}

// EventType names the event in the log.
func (Minted) EventType() string { return "MCPTokenMinted" }

// Revoked ends a token's validity for good.
type Revoked struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspaceId"`
	RevokedAt   time.Time `json:"revokedAt"`
	Reason      string    `json:"reason,omitempty"`
}

// EventType names the event in the log.
func (Revoked) EventType() string { return "MCPTokenRevoked" }

func init() { domain.Events.Register(Minted{}, Revoked{}) }

// State is a token folded from its stream.
type State struct {
	Exists      bool
	ID          string
	WorkspaceID string
	Label       string
	Hash        string
	CreatedAt   time.Time
	ExpiresAt   *time.Time
	Revoked     bool
	RevokedAt   *time.Time
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Minted:
		return State{Exists: true, ID: ev.ID, WorkspaceID: ev.WorkspaceID, Label: ev.Label, Hash: ev.Hash,
			CreatedAt: ev.CreatedAt, ExpiresAt: ev.ExpiresAt}
	case Revoked:
		if !s.Revoked {
			at := ev.RevokedAt
			s.Revoked, s.RevokedAt = true, &at
		}
	}
	return s
}

// Usable reports whether the token may authenticate a request at now: it exists, is not
// revoked and has not expired (a token expires at the instant ExpiresAt).
func (s State) Usable(now time.Time) bool {
	return s.Exists && !s.Revoked && (s.ExpiresAt == nil || now.Before(*s.ExpiresAt))
}

// Mint is the command to record a new token whose random part the caller drew (randomness is
// I/O, so it happens outside the domain); Hash is Hash(token).
type Mint struct {
	ID          string
	WorkspaceID string
	Label       string
	Hash        string
	ExpiresAt   *time.Time
}

// DecideMint records the token once; minting an existing id is ErrAlreadyExists.
func DecideMint(s State, c Mint, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if id, err := uuid.Parse(c.ID); err != nil || id.String() != c.ID {
		return nil, domain.Invalid("id", "must be a UUID")
	}
	if c.WorkspaceID == "" {
		return nil, domain.Invalid("workspaceId", "is required")
	}
	if len(c.Hash) != 2*sha256.Size {
		return nil, domain.Invalid("token", "the token's hash is required")
	}
	label := strings.TrimSpace(c.Label)
	if !utf8.ValidString(label) {
		return nil, domain.Invalid("label", "must be valid UTF-8")
	}
	if utf8.RuneCountInString(label) > MaxLabelLength {
		return nil, domain.Invalid("label", "must be at most %d characters", MaxLabelLength)
	}
	var expires *time.Time
	if c.ExpiresAt != nil {
		if !c.ExpiresAt.After(now) {
			return nil, domain.Invalid("expiresAt", "must be in the future")
		}
		e := c.ExpiresAt.UTC()
		expires = &e
	}
	return []domain.Event{Minted{ID: c.ID, WorkspaceID: c.WorkspaceID, Label: label, Hash: c.Hash,
		CreatedAt: now.UTC(), ExpiresAt: expires}}, nil
}

// DecideRevoke revokes the token of workspaceID. A token of another workspace is ErrNotFound,
// as an unknown one is, so a caller learns nothing about other workspaces' tokens. Revoking a
// revoked token changes nothing, so a retried or repeated revocation succeeds quietly.
func DecideRevoke(s State, workspaceID, reason string, now time.Time) ([]domain.Event, error) {
	if !s.Exists || s.WorkspaceID != workspaceID {
		return nil, domain.ErrNotFound
	}
	if s.Revoked {
		return nil, nil
	}
	reason = strings.TrimSpace(reason)
	if utf8.RuneCountInString(reason) > MaxReasonLength {
		return nil, domain.Invalid("reason", "must be at most %d characters", MaxReasonLength)
	}
	return []domain.Event{Revoked{ID: s.ID, WorkspaceID: s.WorkspaceID, RevokedAt: now.UTC(), Reason: reason}}, nil
}

// Format builds the token of id with the given random bytes (RandomBytes of them).
func Format(id uuid.UUID, random []byte) string {
	return domain.FormatToken(Prefix, id.String(), random)
}

// ParseID returns the token id embedded in a token, checking only the token's shape: whether
// the token is genuine is decided by comparing Hash(token) with the stored hash.
func ParseID(token string) (string, error) {
	id, ok := domain.TokenID(token, Prefix)
	if !ok {
		return "", ErrMalformed
	}
	return id, nil
}

// Hash is the stored form of a token: the lowercase hex SHA-256 of the whole token.
func Hash(token string) string { return domain.TokenHash(token) }
