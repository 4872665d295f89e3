// Package httperr is Switchyard's one error vocabulary over HTTP: the table that maps an error
// from commands and queries to a status and a message safe to show, and the writer of the
// SPEC.md 7 body. The /v1 API, MCP, identity and the console all answer failures through it;
// the console renders the same status and message as a page instead of JSON.
package httperr

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/internal/dbfail"
)

// Body is the body of every non-2xx /v1 response (SPEC.md 7).
type Body struct {
	Message    string `json:"message"`
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
}

// Rule maps the errors Match accepts to Status, with the message Message makes of them.
type Rule struct {
	Match   func(error) bool
	Status  int
	Message func(error) string
	// RetryAfter, when set, is sent as the Retry-After header: the same request may succeed later.
	RetryAfter string
}

// UnavailableRetryAfter is the Retry-After of a 503: about how long PostgreSQL takes to restart.
const UnavailableRetryAfter = "2"

// UnavailableMessage is the message of a 503 for a dependency that cannot be reached for now.
const UnavailableMessage = "service temporarily unavailable; retry later"

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func say(msg string) func(error) string { return func(error) string { return msg } }

// safeMessage is the message of the first error in the chain that carries one meant for the
// caller (a validation, conflict or refusal), else fallback.
func safeMessage(fallback string) func(error) string {
	return func(err error) string {
		var ve *domain.ValidationError
		var ce *domain.ConflictError
		var fe *domain.ForbiddenError
		var msg interface{ Error() string }
		switch {
		case errors.As(err, &ve):
			msg = ve
		case errors.As(err, &ce):
			msg = ce
		case errors.As(err, &fe):
			msg = fe
		}
		if msg == nil {
			return fallback
		}
		return msg.Error()
	}
}

// Rules is the one mapping from error to status, tried in order; an error no rule matches is
// a 500 whose cause is logged, never shown. Add a case here, not in a handler.
var Rules = []Rule{
	{Match: is(domain.ErrInvalid), Status: http.StatusBadRequest, Message: safeMessage("invalid request")},
	{Match: is(domain.ErrNotFound), Status: http.StatusNotFound, Message: say("not found")},
	{Match: is(domain.ErrAlreadyExists), Status: http.StatusConflict, Message: safeMessage("already exists")},
	{Match: is(domain.ErrConflict), Status: http.StatusConflict, Message: safeMessage("conflict")},
	{Match: is(domain.ErrInsufficientCredits), Status: http.StatusPaymentRequired, Message: say("insufficient credits")},
	{Match: is(domain.ErrForbidden), Status: http.StatusForbidden, Message: safeMessage("forbidden")},
	// A replay found at the commit that would have recorded it (commands.RequestClaim): the
	// answer is the one the SDK middleware gives a replay it finds itself (SPEC.md 5).
	{Match: is(domain.ErrReplayed), Status: http.StatusUnauthorized, Message: say("invalid signature")},
	// A refused or lost database connection: nothing was decided, the caller may retry
	// (docs/operations.md). Logged as a warning by WriteErr, not as an unexpected error.
	{Match: dbfail.Unavailable, Status: http.StatusServiceUnavailable, Message: say(UnavailableMessage), RetryAfter: UnavailableRetryAfter},
}

// Classify returns the status and message of err; ok is false for an unexpected error (500,
// "internal error"), which the caller logs.
func Classify(err error) (status int, message string, ok bool) {
	r, ok := rule(err)
	if !ok {
		return http.StatusInternalServerError, "internal error", false
	}
	return r.Status, r.Message(err), true
}

func rule(err error) (Rule, bool) {
	for _, r := range Rules {
		if r.Match(err) {
			return r, true
		}
	}
	return Rule{}, false
}

// Write writes status with the SPEC.md 7 body.
func Write(w http.ResponseWriter, status int, message string) {
	JSON(w, status, Body{Message: message, StatusCode: status, Error: http.StatusText(status)})
}

// WriteErr answers err with its status and message; an unexpected error is logged to log and
// answered 500 without detail, so internals never leak to callers.
func WriteErr(w http.ResponseWriter, log logrus.FieldLogger, err error) {
	r, ok := rule(err)
	switch {
	case !ok:
		if log != nil {
			log.WithError(err).Error("request failed")
		}
		Write(w, http.StatusInternalServerError, "internal error")
		return
	case r.RetryAfter != "":
		if log != nil {
			log.WithError(err).Warn("request failed for now")
		}
		w.Header().Set("Retry-After", r.RetryAfter)
	}
	Write(w, r.Status, r.Message(err))
}

// WriteUnavailable answers 503 with Retry-After: a dependency cannot be reached for now, and
// the same request can be sent again.
func WriteUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", UnavailableRetryAfter)
	Write(w, http.StatusServiceUnavailable, UnavailableMessage)
}

// JSON writes v as the JSON body with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// HTML writes a rendered page with the headers every page of the service carries: not cached,
// not sniffed, never framed (a page inside another site's frame is a clickjacking target), no
// referrer, and the page's own Content-Security-Policy.
func HTML(w http.ResponseWriter, status int, csp string, page []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", csp)
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write(page)
}
