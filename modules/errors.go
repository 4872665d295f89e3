package modules

import (
	"errors"
	"fmt"
)

// ErrUnknownModule is returned (wrapped) when a module name is not registered.
var ErrUnknownModule = errors.New("unknown module")

// ErrInfrastructure marks errors that are not the module's verdict on the
// call but a problem of the machinery running it (the caller should leave
// the execution to be retried or reclaimed rather than record a failure).
// Modules return such errors with [Infrastructure]; see [Registry.Run].
var ErrInfrastructure = errors.New("infrastructure error")

// ValidationError reports invalid config or input (an HTTP 400 at submit).
// Field is a dotted path rooted at "config" or "input" (or "module" for an
// unknown module), e.g. "config.expression" or "input.url".
type ValidationError struct {
	Field   string `json:"field"`
	Message string `json:"message"`

	cause error
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Unwrap returns the underlying cause, if any (ErrUnknownModule for an
// unknown module).
func (e *ValidationError) Unwrap() error { return e.cause }

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Failure codes used by the registry and the built-in modules.
const (
	CodeTimeout          = "timeout"            // the run's deadline passed
	CodePanic            = "panic"              // the module panicked
	CodeInvalidRequest   = "invalid_request"    // config/input failed validation at run time
	CodeInvalidOutput    = "invalid_output"     // the module produced something that is not JSON
	CodeModuleError      = "module_error"       // a module returned a plain (non-Failure) error
	CodeFailed           = "failed"             // core.fail's default
	CodeEvaluation       = "evaluation_error"   // json.jq, expr.eval, text.template runtime errors
	CodeOutputTooLarge   = "output_too_large"   // output exceeded the module's size cap
	CodeBlockedAddress   = "blocked_address"    // http.request: SSRF guard refused the destination
	CodeNetwork          = "network_error"      // http.request: DNS, connect, TLS, read errors
	CodeTooManyRedirects = "too_many_redirects" // http.request: more than 5 redirects
	CodeResponseTooLarge = "response_too_large" // http.request: body over maxResponseBytes
	CodeHTTPStatus       = "http_status"        // http.request: status >= 400 with failOnHttpError
)

// Failure is a module's verdict that the call failed. It is what the user
// sees as the execution's "error"; it marshals to
// {"message": "...", "code": "...", "details": ...}.
type Failure struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
	Details any    `json:"details,omitempty"`

	// Stack is the goroutine stack of a recovered panic (code "panic"), for
	// the operator's logs. It is never serialised.
	Stack string `json:"-"`
}

func (f *Failure) Error() string {
	if f.Code == "" {
		return f.Message
	}
	return f.Code + ": " + f.Message
}

// Fail returns a *Failure with the given code and formatted message.
func Fail(code, format string, args ...any) *Failure {
	return &Failure{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsFailure returns the *Failure in err's chain, if there is one.
func AsFailure(err error) (*Failure, bool) {
	var f *Failure
	if errors.As(err, &f) {
		return f, true
	}
	return nil, false
}

type infraError struct{ err error }

func (e *infraError) Error() string   { return e.err.Error() }
func (e *infraError) Unwrap() []error { return []error{e.err, ErrInfrastructure} }

// Infrastructure marks err as an infrastructure error (errors.Is(err,
// ErrInfrastructure) becomes true), so that [Registry.Run] passes it through
// instead of turning it into a Failure. nil stays nil.
func Infrastructure(err error) error {
	if err == nil {
		return nil
	}
	return &infraError{err: err}
}
