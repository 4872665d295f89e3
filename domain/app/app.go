// Package app is the OAuth app registration aggregate (SPEC.md 3 and 5 rule 8): a developer
// registers a draft, edits it, submits it for review; staff approve it (the metadata is then
// locked) or revert it (back to draft, client secret invalidated). Client secrets are recorded
// only as hashes; the secret itself is handed out once.
//
// Every version of the metadata has a revision, and an approval names the revision the
// reviewer saw: an app edited after the reviewer looked is not approved as edited. An edit of
// a submitted app takes it out of the queue, back to draft.
package app

import (
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of apps: app-<clientId>.
const Category = "app"

// Statuses of a registration.
const (
	StatusDraft     = "draft"
	StatusSubmitted = "submitted"
	StatusApproved  = "approved"
)

// Scopes an app may request, with the words the consent page shows for each.
var Scopes = []struct{ Name, Description string }{
	{"openid", "Sign you in with your Switchyard account"},
	{"profile", "See your name"},
	{"email", "See your email address"},
	{"offline_access", "Stay connected when you are not using the app"},
	{"workspace:read", "Read the workspace's workflows"},
	{"workspace:read.billing", "See the workspace's credit balance and billing history"},
	{"workspace:api_keys", "Create API keys for the workspace"},
	{"workspace:admin", "Administer the workspace: change anything, including billing and API keys"},
}

// ScopeDescription returns the plain words for a scope, or "" for an unknown scope.
func ScopeDescription(scope string) string {
	for _, s := range Scopes {
		if s.Name == scope {
			return s.Description
		}
	}
	return ""
}

// ScopeNames lists the supported scope names.
func ScopeNames() []string {
	out := make([]string, len(Scopes))
	for i, s := range Scopes {
		out[i] = s.Name
	}
	return out
}

// Limits on registration metadata.
const (
	MaxNameLength        = 100
	MaxDescriptionLength = 1000
	MaxURLLength         = 2000
	MaxRedirectURIs      = 10
)

// Metadata is what staff review and approval locks.
type Metadata struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	LogoURL      string   `json:"logoUrl"`
	RedirectURIs []string `json:"redirectUris"`
	Scopes       []string `json:"scopes"`
}

// Registered records a new draft app. Public apps (native or browser apps that cannot keep a
// secret) authenticate at the token endpoint with PKCE alone and are never issued a secret.
type Registered struct {
	ClientID    string    `json:"clientId"`
	OwnerUserID string    `json:"ownerUserId"`
	Public      bool      `json:"public"`
	Metadata    Metadata  `json:"metadata"`
	At          time.Time `json:"at"`
}

// Updated replaces the metadata of a draft or submitted app.
type Updated struct {
	ClientID string    `json:"clientId"`
	Metadata Metadata  `json:"metadata"`
	At       time.Time `json:"at"`
}

// Submitted puts the app in the review queue.
type Submitted struct {
	ClientID string    `json:"clientId"`
	At       time.Time `json:"at"`
}

// Approved makes the app live and locks its metadata. Revision is the metadata revision the
// reviewer approved (0 in events recorded before approvals named one).
type Approved struct {
	ClientID   string    `json:"clientId"`
	ReviewerID string    `json:"reviewerId"`
	Revision   int       `json:"revision,omitempty"`
	At         time.Time `json:"at"`
}

// ReturnedToDraft takes a submitted app out of the review queue because its developer edited
// it: the edit needs a review of its own.
type ReturnedToDraft struct {
	ClientID string    `json:"clientId"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// Reverted sends an approved (or submitted) app back to draft; its client secret stops working.
type Reverted struct {
	ClientID   string    `json:"clientId"`
	ReviewerID string    `json:"reviewerId"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
}

// SecretIssued records the hash (hex SHA-256) of a new client secret; it replaces any earlier one.
type SecretIssued struct {
	ClientID   string    `json:"clientId"`
	SecretHash string    `json:"secretHash"`
	At         time.Time `json:"at"`
}

// EventType names the events in the log.
func (Registered) EventType() string      { return "AppRegistered" }
func (Updated) EventType() string         { return "AppUpdated" }
func (Submitted) EventType() string       { return "AppSubmitted" }
func (Approved) EventType() string        { return "AppApproved" }
func (Reverted) EventType() string        { return "AppReverted" }
func (ReturnedToDraft) EventType() string { return "AppReturnedToDraft" }
func (SecretIssued) EventType() string    { return "AppSecretIssued" }

func init() {
	domain.Events.Register(Registered{}, Updated{}, Submitted{}, Approved{}, Reverted{}, SecretIssued{}, ReturnedToDraft{})
}

// State is an app folded from its stream.
type State struct {
	Exists      bool
	ClientID    string
	OwnerUserID string
	Public      bool
	Metadata    Metadata
	// Revision counts the versions of Metadata: 1 as registered, one more for each edit. An
	// approval names it.
	Revision   int
	Status     string
	SecretHash string // "" when no valid secret exists
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Registered:
		return State{Exists: true, ClientID: ev.ClientID, OwnerUserID: ev.OwnerUserID, Public: ev.Public,
			Metadata: ev.Metadata, Revision: 1, Status: StatusDraft, CreatedAt: ev.At, UpdatedAt: ev.At}
	case Updated:
		s.Metadata, s.Revision, s.UpdatedAt = ev.Metadata, s.Revision+1, ev.At
	case ReturnedToDraft:
		s.Status, s.UpdatedAt = StatusDraft, ev.At
	case Submitted:
		s.Status, s.UpdatedAt = StatusSubmitted, ev.At
	case Approved:
		s.Status, s.UpdatedAt = StatusApproved, ev.At
	case Reverted:
		s.Status, s.SecretHash, s.UpdatedAt = StatusDraft, "", ev.At
	case SecretIssued:
		s.SecretHash, s.UpdatedAt = ev.SecretHash, ev.At
	}
	return s
}

// Live reports whether the OAuth flow is enabled for the app.
func (s State) Live() bool { return s.Exists && s.Status == StatusApproved }

// AllowsRedirect reports whether uri is registered, compared byte for byte (no prefix or
// normalisation games: an attacker-controlled path on the same host must not match).
func (s State) AllowsRedirect(uri string) bool { return slices.Contains(s.Metadata.RedirectURIs, uri) }

// Register is the command to register a draft.
type Register struct {
	ClientID    string
	OwnerUserID string
	Public      bool
	Metadata    Metadata
}

// ValidateRedirectURI accepts absolute https URIs without a fragment, and http only on the
// loopback hosts localhost and 127.0.0.1 (native apps, RFC 8252 7.3).
func ValidateRedirectURI(raw string) error {
	if len(raw) > MaxURLLength {
		return domain.Invalid("redirectUris", "must be at most %d characters each", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return domain.Invalid("redirectUris", "%q is not an absolute URL", raw)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return domain.Invalid("redirectUris", "%q must not have a fragment", raw)
	}
	if u.User != nil {
		return domain.Invalid("redirectUris", "%q must not carry credentials", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || h == "127.0.0.1" {
			return nil
		}
		return domain.Invalid("redirectUris", "%q: http is allowed only for localhost and 127.0.0.1", raw)
	default:
		return domain.Invalid("redirectUris", "%q must use https", raw)
	}
}

// NormalizeMetadata trims and validates metadata; the result is what gets recorded.
func NormalizeMetadata(m Metadata) (Metadata, error) {
	out := Metadata{Name: strings.TrimSpace(m.Name), Description: strings.TrimSpace(m.Description), LogoURL: strings.TrimSpace(m.LogoURL)}
	if out.Name == "" {
		return out, domain.Invalid("name", "is required")
	}
	if utf8.RuneCountInString(out.Name) > MaxNameLength || !utf8.ValidString(out.Name) {
		return out, domain.Invalid("name", "must be valid text of at most %d characters", MaxNameLength)
	}
	if utf8.RuneCountInString(out.Description) > MaxDescriptionLength || !utf8.ValidString(out.Description) {
		return out, domain.Invalid("description", "must be valid text of at most %d characters", MaxDescriptionLength)
	}
	if out.LogoURL != "" {
		u, err := url.Parse(out.LogoURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || len(out.LogoURL) > MaxURLLength {
			return out, domain.Invalid("logoUrl", "must be an https URL")
		}
	}
	out.RedirectURIs = []string{}
	for _, r := range m.RedirectURIs {
		r = strings.TrimSpace(r)
		if err := ValidateRedirectURI(r); err != nil {
			return out, err
		}
		if !slices.Contains(out.RedirectURIs, r) {
			out.RedirectURIs = append(out.RedirectURIs, r)
		}
	}
	if len(out.RedirectURIs) == 0 {
		return out, domain.Invalid("redirectUris", "at least one is required")
	}
	if len(out.RedirectURIs) > MaxRedirectURIs {
		return out, domain.Invalid("redirectUris", "at most %d are allowed", MaxRedirectURIs)
	}
	out.Scopes = []string{}
	for _, s := range m.Scopes {
		s = strings.TrimSpace(s)
		if ScopeDescription(s) == "" {
			return out, domain.Invalid("scopes", "%q is not a supported scope", s)
		}
		if !slices.Contains(out.Scopes, s) {
			out.Scopes = append(out.Scopes, s)
		}
	}
	if len(out.Scopes) == 0 {
		return out, domain.Invalid("scopes", "at least one is required")
	}
	return out, nil
}

// DecideRegister records a new draft.
func DecideRegister(s State, c Register, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if c.ClientID == "" || c.OwnerUserID == "" {
		return nil, domain.Invalid("owner", "is required")
	}
	m, err := NormalizeMetadata(c.Metadata)
	if err != nil {
		return nil, err
	}
	return []domain.Event{Registered{ClientID: c.ClientID, OwnerUserID: c.OwnerUserID, Public: c.Public, Metadata: m, At: now.UTC()}}, nil
}

// ReasonEdited is why an edit took a submitted app out of the review queue.
const ReasonEdited = "edited after it was submitted"

// DecideUpdate edits the metadata; an approved app is locked (ErrConflict, a 409). An edit of
// a submitted app sends it back to draft, so nothing reaches approval unreviewed; saving the
// same metadata again changes nothing.
func DecideUpdate(s State, m Metadata, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	if s.Status == StatusApproved {
		return nil, lockedError{}
	}
	n, err := NormalizeMetadata(m)
	if err != nil {
		return nil, err
	}
	if n.equal(s.Metadata) {
		return nil, nil
	}
	at := now.UTC()
	evs := []domain.Event{Updated{ClientID: s.ClientID, Metadata: n, At: at}}
	if s.Status == StatusSubmitted {
		evs = append(evs, ReturnedToDraft{ClientID: s.ClientID, Reason: ReasonEdited, At: at})
	}
	return evs, nil
}

func (m Metadata) equal(o Metadata) bool {
	return m.Name == o.Name && m.Description == o.Description && m.LogoURL == o.LogoURL &&
		slices.Equal(m.RedirectURIs, o.RedirectURIs) && slices.Equal(m.Scopes, o.Scopes)
}

// lockedError is the conflict of editing an approved app.
type lockedError struct{}

func (lockedError) Error() string { return "app is approved: its metadata is locked" }
func (lockedError) Unwrap() error { return domain.ErrConflict }

// DecideSubmit puts a draft in the review queue; submitting again changes nothing.
func DecideSubmit(s State, now time.Time) ([]domain.Event, error) {
	switch {
	case !s.Exists:
		return nil, domain.ErrNotFound
	case s.Status == StatusSubmitted:
		return nil, nil
	case s.Status == StatusApproved:
		return nil, lockedError{}
	}
	return []domain.Event{Submitted{ClientID: s.ClientID, At: now.UTC()}}, nil
}

// ErrRevisionChanged refuses an approval that names another revision than the app's current
// one: the app changed after the reviewer looked at it. It is a conflict (409).
var ErrRevisionChanged error = revisionChangedError{}

type revisionChangedError struct{}

func (revisionChangedError) Error() string {
	return "the app changed since it was reviewed: review the current revision"
}
func (revisionChangedError) Unwrap() error { return domain.ErrConflict }

// DecideApprove approves revision of a submitted app, the revision the reviewer saw
// (ErrRevisionChanged when it is no longer the current one); approving an approved app again
// with its revision changes nothing.
func DecideApprove(s State, reviewerID string, revision int, now time.Time) ([]domain.Event, error) {
	switch {
	case !s.Exists:
		return nil, domain.ErrNotFound
	case revision <= 0:
		return nil, domain.Invalid("revision", "is required: the revision of the app that was reviewed")
	case revision != s.Revision:
		return nil, ErrRevisionChanged
	case s.Status == StatusApproved:
		return nil, nil
	case s.Status != StatusSubmitted:
		return nil, domain.Invalid("status", "only a submitted app can be approved")
	}
	return []domain.Event{Approved{ClientID: s.ClientID, ReviewerID: reviewerID, Revision: revision, At: now.UTC()}}, nil
}

// DecideRevert sends a submitted or approved app back to draft; a draft stays as it is.
func DecideRevert(s State, reviewerID, reason string, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	if s.Status == StatusDraft {
		return nil, nil
	}
	reason = strings.TrimSpace(reason)
	if utf8.RuneCountInString(reason) > MaxDescriptionLength {
		return nil, domain.Invalid("reason", "must be at most %d characters", MaxDescriptionLength)
	}
	return []domain.Event{Reverted{ClientID: s.ClientID, ReviewerID: reviewerID, Reason: reason, At: now.UTC()}}, nil
}

// DecideIssueSecret records a new secret hash, replacing the previous secret. Public apps have
// no secret.
func DecideIssueSecret(s State, secretHash string, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	if s.Public {
		return nil, domain.Invalid("clientSecret", "a public app has no client secret")
	}
	if secretHash == "" {
		return nil, domain.Invalid("clientSecret", "is required")
	}
	return []domain.Event{SecretIssued{ClientID: s.ClientID, SecretHash: secretHash, At: now.UTC()}}, nil
}
