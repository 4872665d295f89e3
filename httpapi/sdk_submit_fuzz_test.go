package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
)

// FuzzParseSubmit feeds arbitrary bodies to the submit parser. Seeds are in
// testdata/fuzz/FuzzParseSubmit and run with every `go test`; `go test -fuzz FuzzParseSubmit
// ./http/` explores further (docs/security.md).
//
// Properties: it never panics; a refusal is a *domain.ValidationError naming a field of the
// request; an accepted body has a module, object input and config, and waitForMs within its
// bounds (attempts is the command's to bound); re-encoding what was accepted parses back to the
// same request.
func FuzzParseSubmit(f *testing.F) {
	f.Add([]byte(`{"module":"core.echo","input":{"a":1},"config":{}}`))
	f.Add([]byte(`{"module":"core.echo","input":{},"config":{},"attempts":3,"waitForMs":15000,` +
		`"callbackUrl":"https://example.test/cb","callbackSecret":"s","callbackHeaders":{"X-Trace":"1"}}`))
	// Issue 26: refused as sent, naming a path into the body.
	f.Add([]byte(`{"module":"core.echo","input":{"n":[1e131073]},"config":{},"callbackSecret":"\ud800"}`))
	f.Add([]byte(`{"module":"core.echo","input":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `},"config":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseSubmit(body)
		if err != nil {
			checkSubmitRefusal(t, body, err)
			return
		}
		checkSubmitBounds(t, req)
		again, err := parseSubmit(encodeSubmit(t, req))
		if err != nil {
			t.Fatalf("re-encoded accepted body refused: %v (body %q)", err, body)
		}
		if !reflect.DeepEqual(normalizedSubmit(again), normalizedSubmit(req)) {
			t.Fatalf("round trip changed the request:\n got %#v\nwant %#v", again, req)
		}
	})
}

func checkSubmitRefusal(t *testing.T, body []byte, err error) {
	t.Helper()
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("refusal is %T %v, want *domain.ValidationError (body %q)", err, err, body)
	}
	field := ve.Field
	if field == "" || ve.Message == "" {
		t.Fatalf("refusal %#v names no field or says nothing (body %q)", ve, body)
	}
	if field == "body" {
		return
	}
	// A field is named as sent, or by a path into one (domain.CheckJSONBody): it must then
	// really be, or start with, a key of the body.
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		t.Fatalf("refusal names %q, but the body is not an object (body %q)", field, body)
	}
	for key := range fields {
		if field == key || strings.HasPrefix(field, key+".") || strings.HasPrefix(field, key+"[") ||
			strings.HasPrefix(field, "["+strconv.Quote(key)+"]") {
			return
		}
	}
	if !knownSubmitField[field] {
		t.Fatalf("refusal names %q, which is not a field of the body %q", field, body)
	}
}

func checkSubmitBounds(t *testing.T, req submitRequest) {
	t.Helper()
	if strings.TrimSpace(req.Module) == "" {
		t.Fatalf("accepted an empty module: %#v", req)
	}
	for name, raw := range map[string]json.RawMessage{"input": req.Input, "config": req.Config} {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			t.Fatalf("accepted %s %q that is not a JSON object", name, raw)
		}
	}
	if req.WaitForMs < 0 || req.WaitForMs > execution.MaxWaitForMs {
		t.Fatalf("accepted waitForMs %d", req.WaitForMs)
	}
	// The attempts range and the callback fields' contents (https, reserved headers, lengths)
	// are checked by the submit command, not the body parser: FuzzParseSubmit holds the parser
	// to its own part.
}

// encodeSubmit writes an accepted request back as the body a client would send.
func encodeSubmit(t *testing.T, req submitRequest) []byte {
	t.Helper()
	body := map[string]any{"module": req.Module, "input": req.Input, "config": req.Config,
		"attempts": req.Attempts, "waitForMs": req.WaitForMs}
	if req.CallbackURL != "" {
		body["callbackUrl"] = req.CallbackURL
	}
	if req.CallbackSecret != "" {
		body["callbackSecret"] = req.CallbackSecret
	}
	if len(req.CallbackHeaders) > 0 {
		body["callbackHeaders"] = req.CallbackHeaders
	}
	return encodeAsSent(t, body)
}

// encodeAsSent encodes v as a client would send it. Not json.Marshal: it would escape <, >
// and & inside raw input and config, which the parsers keep as sent.
func encodeAsSent(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding %#v: %v", v, err)
	}
	return buf.Bytes()
}

// normalizedSubmit makes an absent and an empty header map compare equal.
func normalizedSubmit(req submitRequest) submitRequest {
	if len(req.CallbackHeaders) == 0 {
		req.CallbackHeaders = nil
	}
	return req
}
