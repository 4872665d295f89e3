package domain

import (
	"errors"
	"fmt"
)

// Sentinel errors that callers branch on (HTTP maps them to status codes).
var (
	ErrNotFound            = errors.New("not found")
	ErrAlreadyExists       = errors.New("already exists")
	ErrConflict            = errors.New("conflict")
	ErrInsufficientCredits = errors.New("insufficient credits")
	ErrForbidden           = errors.New("forbidden")
	ErrInvalid             = errors.New("invalid")
	// ErrReplayed is a signed request whose signature another request has used: a replay.
	ErrReplayed = errors.New("request signature used before")
	// ErrUnavailable is a dependency (the database) that cannot be reached for now: retry later.
	ErrUnavailable = errors.New("temporarily unavailable")
)

// ValidationError names the field that is wrong, for a 400 that tells the caller what to fix.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }

// Unwrap makes errors.Is(err, ErrInvalid) match.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Invalid builds a ValidationError.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ConflictError is a conflict whose message is safe to show the caller (a 409 that says what
// clashed).
type ConflictError struct{ Message string }

func (e *ConflictError) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrConflict) match.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Conflict builds a ConflictError.
func Conflict(format string, args ...any) error {
	return &ConflictError{Message: fmt.Sprintf(format, args...)}
}

// ForbiddenError is a refusal whose message is safe to show the caller (a 403 that says why).
type ForbiddenError struct{ Message string }

func (e *ForbiddenError) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrForbidden) match.
func (e *ForbiddenError) Unwrap() error { return ErrForbidden }

// Forbidden builds a ForbiddenError.
func Forbidden(format string, args ...any) error {
	return &ForbiddenError{Message: fmt.Sprintf(format, args...)}
}
