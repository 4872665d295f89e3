package httpapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
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

// parseSubmit reads the body field by field, so that every 400 names its field. It checks the
// JSON types; the submit command checks the values (commands.SubmitExecution), except
// waitForMs, which bounds this request's own wait.
func parseSubmit(body []byte) (submitRequest, error) {
	req := submitRequest{Attempts: 1}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return req, domain.Invalid("body", "must be a JSON object")
	}
	if err := domain.CheckJSONBody("body", body); err != nil {
		return req, err
	}
	if _, ok := fields[""]; ok {
		return req, domain.Invalid("body", "has a field with an empty name")
	}
	if name, ok := unknownField(fields, func(name string) bool { return knownSubmitField[name] }); ok {
		return req, domain.Invalid(name, "is not a field of this request")
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
	if req.Attempts, err = optionalInteger(fields, "attempts", 1); err != nil {
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

// unknownField is the first field of fields, in name order, that known refuses: a refusal names
// the same field for the same body every time, not whichever a map's order gives first. The
// names are sorted only once one is refused.
func unknownField(fields map[string]json.RawMessage, known func(string) bool) (string, bool) {
	for name := range fields {
		if known(name) {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			if !known(name) {
				return name, true
			}
		}
	}
	return "", false
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
	// Compact checks the value is JSON, so its first byte tells an object: no decoding it
	// into a map to find out (every submit's input and config went through one).
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
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

// optionalInteger reads an optional integer field, checking its type only: its range is the
// command's to check. A number beyond an int32 is kept at its bound, which no range admits.
func optionalInteger(fields map[string]json.RawMessage, name string, def int) (int, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return def, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) {
		return 0, domain.Invalid(name, "must be an integer")
	}
	return int(max(min(f, math.MaxInt32), math.MinInt32)), nil
}

func optionalString(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", domain.Invalid(name, "must be a string")
	}
	return s, nil
}

// parseCallback reads the callback fields; the command checks what they hold.
func parseCallback(fields map[string]json.RawMessage, req *submitRequest) error {
	var err error
	if req.CallbackURL, err = optionalString(fields, "callbackUrl"); err != nil {
		return err
	}
	if req.CallbackSecret, err = optionalString(fields, "callbackSecret"); err != nil {
		return err
	}
	if raw, ok := fields["callbackHeaders"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.CallbackHeaders); err != nil {
			return domain.Invalid("callbackHeaders", "must be an object of string values")
		}
	}
	return nil
}

// command is the submit use case for the request of caller.
func (req submitRequest) command(caller Caller) commands.SubmitExecution {
	return commands.SubmitExecution{WorkspaceID: caller.WorkspaceID, APIKeyID: caller.KeyID, Module: req.Module,
		Input: req.Input, Config: req.Config, Attempts: req.Attempts, WaitFor: time.Duration(req.WaitForMs) * time.Millisecond,
		Callback: commands.CallbackRequest{URL: req.CallbackURL, Secret: req.CallbackSecret, Headers: req.CallbackHeaders}}
}
