// Package bearer is the one reading of bearer credentials, shared by the /v1 API, the OpenID
// Connect provider and the console: the token of an Authorization header, the principal a
// verified token stands for, and the error a refused token is.
package bearer

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain/access"
)

// SessionCookie is the cookie that holds a browser session's JWT on plain http; on https the
// provider names it with the __Host- prefix (identity.Provider.SessionCookieName).
const SessionCookie = "sy_session"

// ErrInvalidToken is any reason a bearer token is refused (SPEC.md 7: 401).
var ErrInvalidToken = errors.New("invalid token")

// Principal is who a verified bearer token stands for.
type Principal struct {
	// Session is true for a session JWT (a signed-in user, acting with their workspace roles);
	// false for an app's access token (bound to WorkspaceID with Scopes).
	Session         bool
	UserID          string
	ClientID        string
	WorkspaceID     string
	Scopes          []string
	AuthorizationID string
	SessionID       string
	ExpiresAt       time.Time
}

// Caller is the principal as domain/access sees it.
func (p Principal) Caller() access.Caller {
	return access.Caller{UserID: p.UserID, Session: p.Session, WorkspaceID: p.WorkspaceID, Scopes: p.Scopes}
}

// Verifier checks a bearer token (an app's access token or a session JWT); identity.Provider
// is one. ErrInvalidToken means a 401.
type Verifier interface {
	VerifyBearer(ctx context.Context, token string) (Principal, error)
}

// Token returns the token of r's Authorization header, trimmed, and whether the header uses
// the Bearer scheme (case-insensitively) at all: a header "Bearer " with nothing after it has
// the scheme and an empty token.
func Token(r *http.Request) (token string, ok bool) {
	h := r.Header.Get("Authorization")
	if len(h) < len("bearer x") || !strings.EqualFold(h[:len("bearer ")], "bearer ") {
		return "", false
	}
	return strings.TrimSpace(h[len("bearer "):]), true
}
