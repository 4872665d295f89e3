package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"sort"
	"strings"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/seal"
)

// Bounds of the callback fields of a submit.
const (
	maxCallbackURL     = 2048
	maxCallbackSecret  = 1024
	maxCallbackHeaders = 20
	maxHeaderValue     = 4096
)

// submitRequest is the body of POST /v1/sdk/components (SPEC.md 4.1).
type submitRequest struct {
	Module          string
	Input           json.RawMessage
	Config          json.RawMessage
	Attempts        int
	WaitForMs       int
	CallbackURL     string
	CallbackSecret  string
	CallbackHeaders map[string]string
}

// parseSubmit reads and checks the body field by field, so that every 400 names its field.
func parseSubmit(body []byte) (submitRequest, error) {
	req := submitRequest{Attempts: 1}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return req, domain.Invalid("body", "must be a JSON object")
	}
	for name := range fields {
		if !knownSubmitField[name] {
			return req, domain.Invalid(name, "is not a field of this request")
		}
	}
	var err error
	if req.Module, err = requiredString(fields, "module"); err != nil {
		return req, err
	}
	if req.Input, err = requiredObject(fields, "input"); err != nil {
		return req, err
	}
	if req.Config, err = requiredObject(fields, "config"); err != nil {
		return req, err
	}
	if req.Attempts, err = optionalInt(fields, "attempts", execution.MinAttempts, execution.MaxAttempts, 1); err != nil {
		return req, err
	}
	if req.WaitForMs, err = optionalInt(fields, "waitForMs", 0, execution.MaxWaitForMs, 0); err != nil {
		return req, err
	}
	if err := parseCallback(fields, &req); err != nil {
		return req, err
	}
	return req, nil
}

var knownSubmitField = map[string]bool{"module": true, "input": true, "config": true, "attempts": true,
	"waitForMs": true, "callbackUrl": true, "callbackSecret": true, "callbackHeaders": true}

func isNull(raw json.RawMessage) bool {
	return raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func requiredString(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return "", domain.Invalid(name, "is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", domain.Invalid(name, "must be a string")
	}
	if strings.TrimSpace(s) == "" {
		return "", domain.Invalid(name, "must not be empty")
	}
	return s, nil
}

func requiredObject(fields map[string]json.RawMessage, name string) (json.RawMessage, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil, domain.Invalid(name, "is required (an object, {} for none)")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, domain.Invalid(name, "must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, domain.Invalid(name, "must be a JSON object")
	}
	return buf.Bytes(), nil
}

func optionalInt(fields map[string]json.RawMessage, name string, lo, hi, def int) (int, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return def, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) {
		return 0, domain.Invalid(name, "must be an integer from %d to %d", lo, hi)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, domain.Invalid(name, "must be an integer from %d to %d", lo, hi)
	}
	return int(f), nil
}

func optionalString(fields map[string]json.RawMessage, name string, maxLen int) (string, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", domain.Invalid(name, "must be a string")
	}
	if len(s) > maxLen {
		return "", domain.Invalid(name, "must be at most %d characters", maxLen)
	}
	return s, nil
}

func parseCallback(fields map[string]json.RawMessage, req *submitRequest) error {
	var err error
	if req.CallbackURL, err = optionalString(fields, "callbackUrl", maxCallbackURL); err != nil {
		return err
	}
	if req.CallbackSecret, err = optionalString(fields, "callbackSecret", maxCallbackSecret); err != nil {
		return err
	}
	if raw, ok := fields["callbackHeaders"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.CallbackHeaders); err != nil {
			return domain.Invalid("callbackHeaders", "must be an object of string values")
		}
	}
	if req.CallbackURL == "" {
		if req.CallbackSecret != "" || len(req.CallbackHeaders) > 0 {
			return domain.Invalid("callbackUrl", "is required with callbackSecret or callbackHeaders")
		}
		return nil
	}
	if err := checkCallbackURL(req.CallbackURL); err != nil {
		return err
	}
	return checkCallbackHeaders(req.CallbackHeaders)
}

func checkCallbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "" {
		return domain.Invalid("callbackUrl", "must be an absolute https URL")
	}
	if u.Scheme != "https" {
		return domain.Invalid("callbackUrl", "must use https")
	}
	if u.User != nil {
		return domain.Invalid("callbackUrl", "must not carry credentials; use callbackHeaders")
	}
	return nil
}

// reservedCallbackHeaders are set by the delivery itself (SPEC.md 6.1) and cannot be overridden.
var reservedCallbackHeaders = map[string]bool{"content-type": true, "content-length": true, "host": true,
	"user-agent": true, "x-delivery-id": true, "x-event": true, "x-signature": true, "x-signature-version": true,
	"x-signature-timestamp": true, "transfer-encoding": true, "connection": true}

func checkCallbackHeaders(h map[string]string) error {
	if len(h) > maxCallbackHeaders {
		return domain.Invalid("callbackHeaders", "must have at most %d headers", maxCallbackHeaders)
	}
	for name, value := range h {
		field := "callbackHeaders." + name
		if !validHeaderName(name) {
			return domain.Invalid(field, "is not a valid header name")
		}
		if reservedCallbackHeaders[strings.ToLower(name)] {
			return domain.Invalid(field, "is set by the delivery and cannot be overridden")
		}
		if len(value) > maxHeaderValue || strings.ContainsAny(value, "\r\n\x00") {
			return domain.Invalid(field, "must be a single-line value of at most %d characters", maxHeaderValue)
		}
	}
	return nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > 127 || !(c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
			c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~' ||
			(c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	return true
}

// sealCallback seals the secret and header values: they enter the event log only encrypted,
// bound to the field they belong to.
func sealCallback(s *seal.Sealer, req submitRequest) (execution.Callback, error) {
	cb := execution.Callback{URL: req.CallbackURL}
	if req.CallbackSecret != "" {
		sealed, err := s.Seal([]byte(req.CallbackSecret), []byte("callbackSecret"))
		if err != nil {
			return cb, err
		}
		cb.SealedSecret = sealed
	}
	if len(req.CallbackHeaders) > 0 {
		plain, err := json.Marshal(req.CallbackHeaders)
		if err != nil {
			return cb, err
		}
		if cb.SealedHeaders, err = s.Seal(plain, []byte("callbackHeaders")); err != nil {
			return cb, err
		}
		for name := range req.CallbackHeaders {
			cb.HeaderNames = append(cb.HeaderNames, name)
		}
		sort.Strings(cb.HeaderNames)
	}
	return cb, nil
}
