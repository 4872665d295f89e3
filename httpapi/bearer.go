package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/switchyard/switchyard/web/bearer"
)

type principalKey struct{}

// PrincipalFrom returns who BearerAuth authenticated.
func PrincipalFrom(ctx context.Context) (bearer.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(bearer.Principal)
	return p, ok
}

// BearerAuth requires Authorization: Bearer with a valid token: 401 with the SPEC.md 7 body
// and a WWW-Authenticate challenge when it is missing, expired, revoked or not ours.
func BearerAuth(v bearer.Verifier, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer.Token(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			WriteError(w, http.StatusUnauthorized, "missing bearer token")
			return
		}
		p, err := v.VerifyBearer(r.Context(), token)
		if err != nil {
			if !errors.Is(err, bearer.ErrInvalidToken) {
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
