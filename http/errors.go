// Package httpapi serves Switchyard's HTTP interface: the /v1 SDK and workspace routes, the
// health and metrics endpoints, and the error body every /v1 failure shares (SPEC.md 7).
package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/domain"
)

// ErrorBody is the body of every non-2xx /v1 response (SPEC.md 7).
type ErrorBody struct {
	Message    string `json:"message"`
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
}

// WriteError writes status with the SPEC.md 7 body.
func WriteError(w http.ResponseWriter, status int, message string) {
	WriteJSON(w, status, ErrorBody{Message: message, StatusCode: status, Error: http.StatusText(status)})
}

// WriteJSON writes v as the JSON body with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteDomainError maps an error from commands or queries to its status; anything unexpected
// is logged and answered 500 without detail, so internals never leak to callers.
func WriteDomainError(w http.ResponseWriter, r *http.Request, err error) {
	var ve *domain.ValidationError
	switch {
	case errors.As(err, &ve):
		WriteError(w, http.StatusBadRequest, ve.Error())
	case errors.Is(err, domain.ErrNotFound):
		WriteError(w, http.StatusNotFound, "not found")
	case errors.Is(err, domain.ErrAlreadyExists), errors.Is(err, domain.ErrConflict):
		WriteError(w, http.StatusConflict, conflictMessage(err))
	case errors.Is(err, domain.ErrInsufficientCredits):
		WriteError(w, http.StatusPaymentRequired, "insufficient credits")
	case errors.Is(err, domain.ErrForbidden):
		WriteError(w, http.StatusForbidden, "forbidden")
	default:
		LoggerFrom(r.Context()).WithError(err).Error("request failed")
		WriteError(w, http.StatusInternalServerError, "internal error")
	}
}

func conflictMessage(err error) string {
	var ce *domain.ConflictError
	if errors.As(err, &ce) {
		return ce.Message
	}
	if errors.Is(err, domain.ErrAlreadyExists) {
		return "already exists"
	}
	return "conflict"
}

// notFound answers unknown routes with the SPEC.md 7 body.
func notFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
}

// methodNotAllowed answers a known route called with the wrong method.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
}

// logger returns a logger that never panics on a nil FieldLogger.
func logger(l logrus.FieldLogger) logrus.FieldLogger {
	if l == nil {
		return logrus.StandardLogger()
	}
	return l
}
