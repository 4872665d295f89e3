package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/switchyard/switchyard/identity"
)

// BearerVerifier checks a bearer token (an app's access token or a session JWT);
// identity.Provider is one. identity.ErrInvalidToken means a 401.
type BearerVerifier interface {
	VerifyBearer(ctx context.Context, token string) (identity.Principal, error)
}

type principalKey struct{}

// PrincipalFrom returns who BearerAuth authenticated.
func PrincipalFrom(ctx context.Context) (identity.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(identity.Principal)
	return p, ok
}

// BearerAuth requires Authorization: Bearer with a valid token: 401 with the SPEC.md 7 body
// and a WWW-Authenticate challenge when it is missing, expired, revoked or not ours.
func BearerAuth(v BearerVerifier, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if len(h) < 8 || !strings.EqualFold(h[:7], "bearer ") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			WriteError(w, http.StatusUnauthorized, "missing bearer token")
			return
		}
		p, err := v.VerifyBearer(r.Context(), strings.TrimSpace(h[7:]))
		if err != nil {
			if !errors.Is(err, identity.ErrInvalidToken) {
				WriteDomainError(w, r, err)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard", error="invalid_token"`)
			WriteError(w, http.StatusUnauthorized, "invalid, expired or revoked token")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}
