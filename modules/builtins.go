package modules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// BuiltinsConfig configures the built-in modules.
type BuiltinsConfig struct {
	// AllowPrivateNetworks turns off http.request's SSRF guard (see package
	// netguard). The server sets it from SWITCHYARD_WEBHOOK_ALLOW_PRIVATE;
	// tests set it to reach httptest servers. Default false.
	AllowPrivateNetworks bool
	// MaxHTTPResponseBytes caps http.request's config.maxResponseBytes and is
	// its default; zero means DefaultMaxHTTPResponseBytes.
	MaxHTTPResponseBytes int64
	// HTTPUserAgent is sent by http.request unless the call sets its own;
	// empty means "Switchyard-HTTP-Module/1".
	HTTPUserAgent string
}

// setDefaults fills zero values and repairs a negative MaxHTTPResponseBytes with the default,
// so that Builtins, which returns no error, always gets a valid config.
func (c *BuiltinsConfig) setDefaults() {
	if c.MaxHTTPResponseBytes <= 0 {
		c.MaxHTTPResponseBytes = DefaultMaxHTTPResponseBytes
	}
	if c.HTTPUserAgent == "" {
		c.HTTPUserAgent = "Switchyard-HTTP-Module/1"
	}
}

// Validate reports a field out of range, by name. Zero values are valid: they take the default.
func (c BuiltinsConfig) Validate() error {
	if c.MaxHTTPResponseBytes < 0 {
		return fmt.Errorf("modules: MaxHTTPResponseBytes %d: must not be negative", c.MaxHTTPResponseBytes)
	}
	return nil
}

// Builtins returns a new registry holding every built-in module. It calls opts.setDefaults,
// which repairs what Validate would refuse, so it needs no error result.
func Builtins(opts BuiltinsConfig) *Registry {
	opts.setDefaults()
	r := New()
	for _, m := range []Module{
		repeatable(echoModule()),
		delayModule(),
		failModule(),
		repeatable(jqModule()),
		repeatable(templateModule()),
		repeatable(exprModule()),
		httpModule(opts),
	} {
		if err := r.Register(m); err != nil {
			panic(err)
		}
	}
	return r
}

// decode unmarshals a raw config or input already checked by the schema.
func decode(raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("modules: decoding %s: %w", raw, err)
	}
	return nil
}

// decodeValue decodes raw JSON into a generic value. With ints, numbers that
// are integers fitting an int become int (friendlier arithmetic in expr);
// everything else is float64.
func decodeValue(raw json.RawMessage, ints bool) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return convertNumbers(v, ints), nil
}

func convertNumbers(v any, ints bool) any {
	switch x := v.(type) {
	case json.Number:
		if ints {
			if i, err := x.Int64(); err == nil && i >= math.MinInt && i <= math.MaxInt {
				return int(i)
			}
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e, ints)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e, ints)
		}
		return x
	default:
		return v
	}
}

// capOutput returns a Failure when an output exceeds limit bytes.
func capOutput(name string, out []byte, limit int) (json.RawMessage, error) {
	if len(out) > limit {
		return nil, &Failure{
			Code:    CodeOutputTooLarge,
			Message: fmt.Sprintf("%s: output is larger than %d bytes", name, limit),
			Details: map[string]int{"limitBytes": limit},
		}
	}
	return out, nil
}

// MaxOutputBytes bounds the output of json.jq, text.template and expr.eval.
const MaxOutputBytes = 1 << 20
