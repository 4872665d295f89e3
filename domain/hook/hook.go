// Package hook is the inbound webhook aggregate: the URL /hooks/{token} of one ON_WEBHOOK
// component of a workflow, and the secret its deliveries are signed with. As with MCP tokens,
// the stream keeps only the SHA-256 of the token, and the signing secret sealed: both are
// handed out once, when the hook is issued or rotated, and never recorded in the clear.
//
// A token reads "whk_" + the hook id (a UUID derived from the workflow and component, 36
// characters) + "_" + 64 hex digits of random bytes. The id is embedded so the server folds
// the hook's stream directly, with no read-model lag after a save and no lookup by secret
// value; the random part is what makes the URL unguessable.
package hook

import (
	"crypto/sha256"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of hooks: hook-<id>.
const Category = "hook"

// Shape of a token.
const (
	// Prefix starts every token, so a leaked one is recognisable (secret scanners, logs).
	Prefix = "whk_"
	// RandomBytes is how much randomness a token, and a secret, carries.
	RandomBytes = domain.TokenRandomBytes
)

// Length is the length of every token.
var Length = domain.TokenLength(Prefix)

// ErrMalformed means a string does not have the shape of a token.
var ErrMalformed = errors.New("malformed hook token")

// idSpace is the namespace of hook ids.
var idSpace = uuid.MustParse("6a1f0c55-2f0e-4d0b-8d49-3c7f1f4e9b27")

// ID is the hook id of a workflow's component: one hook per component, whatever the number of
// saves, so a save repeated by two instances issues it once.
func ID(workflowID, componentID string) string {
	return uuid.NewSHA1(idSpace, []byte(workflowID+"\x00"+componentID)).String()
}

// Issued records a component's first hook. Hash is the hex SHA-256 of the whole token;
// SealedSecret the signing secret sealed (seal/).
type Issued struct {
	ID           string    `json:"id"`
	WorkspaceID  string    `json:"workspaceId"`
	WorkflowID   string    `json:"workflowId"`
	ComponentID  string    `json:"componentId"`
	Hash         string    `json:"hash"`
	SealedSecret string    `json:"sealedSecret"`
	IssuedAt     time.Time `json:"issuedAt"`
}

// EventType names the event in the log.
func (Issued) EventType() string { return "HookIssued" }

// Rotated replaces a hook's token and secret: the old token stops working at once.
type Rotated struct {
	ID           string    `json:"id"`
	WorkspaceID  string    `json:"workspaceId"`
	Hash         string    `json:"hash"`
	SealedSecret string    `json:"sealedSecret"`
	RotatedAt    time.Time `json:"rotatedAt"`
}

// EventType names the event in the log.
func (Rotated) EventType() string { return "HookRotated" }

func init() { domain.Events.Register(Issued{}, Rotated{}) }

// State is a hook folded from its stream.
type State struct {
	Exists       bool
	ID           string
	WorkspaceID  string
	WorkflowID   string
	ComponentID  string
	Hash         string
	SealedSecret string
	IssuedAt     time.Time
	RotatedAt    *time.Time
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Issued:
		return State{Exists: true, ID: ev.ID, WorkspaceID: ev.WorkspaceID, WorkflowID: ev.WorkflowID,
			ComponentID: ev.ComponentID, Hash: ev.Hash, SealedSecret: ev.SealedSecret, IssuedAt: ev.IssuedAt}
	case Rotated:
		at := ev.RotatedAt
		s.Hash, s.SealedSecret, s.RotatedAt = ev.Hash, ev.SealedSecret, &at
	}
	return s
}

// Issue is the command to record a component's hook; the caller drew the token and the
// secret (randomness is I/O) and sealed the secret.
type Issue struct {
	WorkspaceID  string
	WorkflowID   string
	ComponentID  string
	Hash         string
	SealedSecret string
}

// DecideIssue records the hook of a component once; issuing it again is ErrAlreadyExists.
func DecideIssue(s State, c Issue, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if err := checkCredentials(c.Hash, c.SealedSecret); err != nil {
		return nil, err
	}
	switch {
	case c.WorkspaceID == "":
		return nil, domain.Invalid("workspaceId", "is required")
	case c.WorkflowID == "":
		return nil, domain.Invalid("workflowId", "is required")
	case c.ComponentID == "":
		return nil, domain.Invalid("componentId", "is required")
	}
	return []domain.Event{Issued{ID: ID(c.WorkflowID, c.ComponentID), WorkspaceID: c.WorkspaceID, WorkflowID: c.WorkflowID,
		ComponentID: c.ComponentID, Hash: c.Hash, SealedSecret: c.SealedSecret, IssuedAt: now.UTC()}}, nil
}

// DecideRotate gives the hook of workspaceID a new token and secret. A hook of another
// workspace is ErrNotFound, as an unknown one is.
func DecideRotate(s State, workspaceID, hash, sealedSecret string, now time.Time) ([]domain.Event, error) {
	if !s.Exists || s.WorkspaceID != workspaceID {
		return nil, domain.ErrNotFound
	}
	if err := checkCredentials(hash, sealedSecret); err != nil {
		return nil, err
	}
	return []domain.Event{Rotated{ID: s.ID, WorkspaceID: s.WorkspaceID, Hash: hash, SealedSecret: sealedSecret, RotatedAt: now.UTC()}}, nil
}

func checkCredentials(hash, sealedSecret string) error {
	if len(hash) != 2*sha256.Size {
		return domain.Invalid("token", "the token's hash is required")
	}
	if sealedSecret == "" {
		return domain.Invalid("secret", "the sealed secret is required")
	}
	return nil
}

// Format builds the token of hook id with the given random bytes (RandomBytes of them).
func Format(id string, random []byte) string { return domain.FormatToken(Prefix, id, random) }

// ParseID returns the hook id embedded in a token, checking only the token's shape: whether
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
