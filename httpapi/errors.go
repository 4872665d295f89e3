// Package httpapi serves Switchyard's HTTP interface: the /v1 SDK and workspace routes, the
// health and metrics endpoints, and the error body every /v1 failure shares (SPEC.md 7).
package httpapi

import (
	"net/http"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/web/httperr"
)

// ErrorBody is the body of every non-2xx /v1 response (SPEC.md 7).
type ErrorBody = httperr.Body

// WriteError writes status with the SPEC.md 7 body.
func WriteError(w http.ResponseWriter, status int, message string) { httperr.Write(w, status, message) }

// WriteJSON writes v as the JSON body with status.
func WriteJSON(w http.ResponseWriter, status int, v any) { httperr.JSON(w, status, v) }

// WriteDomainError answers an error from commands or queries by the one mapping of
// httperr.Rules; anything unexpected is logged with the request's fields and answered 500
// without detail.
func WriteDomainError(w http.ResponseWriter, r *http.Request, err error) {
	httperr.WriteErr(w, LoggerFrom(r.Context()), err)
}

// UnavailableRetryAfter is the Retry-After of a 503 (httperr.UnavailableRetryAfter).
const UnavailableRetryAfter = httperr.UnavailableRetryAfter

// WriteUnavailable answers 503 with Retry-After: a dependency cannot be reached for now.
func WriteUnavailable(w http.ResponseWriter) { httperr.WriteUnavailable(w) }

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
