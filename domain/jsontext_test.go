package domain

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckStorableJSON(t *testing.T) {
	cases := []struct {
		raw string
		ok  bool
	}{
		{`{"a":"plain"}`, true},
		{`{"a":"\u00e9 \ud83d\ude00"}`, true},
		{`{"a":"\\u0000 is text"}`, true},
		{`{"a":"\\\"\u0000"}`, false},
		{`{"a":"\u0000"}`, false},
		{`{"a":"\ud800"}`, false},
		{`{"a":"\udc00x"}`, false},
		{`{"a":"\ud83d\u0041"}`, false},
		{"{\"a\":\"\x00\"}", false},
		{"{\"a\":\"\xff\"}", false},
		{"{\"\xff\":1}", false},
	}
	for _, c := range cases {
		err := CheckStorableJSON("input", []byte(c.raw))
		if (err == nil) != c.ok {
			t.Errorf("%q: err = %v, want ok=%v", c.raw, err, c.ok)
		}
		var ve *ValidationError
		if err != nil && (!errors.As(err, &ve) || ve.Field != "input") {
			t.Errorf("%q: err = %v, want a ValidationError naming input", c.raw, err)
		}
	}
	if err := CheckStorableString("name", "a\x00b"); err == nil {
		t.Error("a NUL in a string was accepted")
	}
	if err := CheckStorableString("name", "\xed\xa0\x80"); err == nil {
		t.Error("a surrogate encoded in UTF-8 was accepted")
	}
	if err := CheckStorableString("name", "ok é"); err != nil {
		t.Errorf("a plain string was refused: %v", err)
	}
}

// Numbers must fit PostgreSQL's numeric, which jsonb stores them as: at most 131072 digits
// before the decimal point and 16383 after it. Each case was checked against PostgreSQL 15
// (`select '<n>'::jsonb`), with 3000 random numbers around both bounds.
func TestCheckStorableJSONNumbers(t *testing.T) {
	for _, c := range []struct {
		num string
		ok  bool
	}{
		{"0", true}, {"-12.5e3", true}, {"1e308", true}, {"1e400", true},
		{"1e131071", true}, {"1E+131071", true}, {"1e131072", false}, {"1e131073", false}, {"1e999999", false},
		{"-1e131073", false}, {"123e131069", true}, {"123e131070", false}, {"0.5e131072", true},
		{"0.00000000001e131082", true}, {"0.00000000001e131083", false},
		{"1e-16383", true}, {"1e-16384", false}, {"1.5e-16382", true}, {"1.5e-16383", false},
		{"100e-16385", false}, {"1.000000e-16378", false},
		{"0e999999", true}, {"0e1073741822", true}, {"0e1073741823", false}, {"0e-16383", true}, {"0.0e-16383", false},
		{"0e-1073741823", false},
		{strings.Repeat("9", 131072), true}, {strings.Repeat("9", 131073), false}, {strings.Repeat("7", 200000), false},
		{"0." + strings.Repeat("0", 16383), true}, {"0." + strings.Repeat("0", 16384), false},
	} {
		for _, doc := range []string{c.num, `{"a":[1,` + c.num + `]}`} {
			err := CheckStorableJSON("input", []byte(doc))
			if (err == nil) != c.ok {
				t.Errorf("%.40s: err = %v, want ok=%v", doc, err, c.ok)
			}
		}
	}
	// A number's digits inside a string are text.
	if err := CheckStorableJSON("input", []byte(`{"a":"1e999999"}`)); err != nil {
		t.Errorf("a string holding a number's text was refused: %v", err)
	}
}

func TestCheckStorableJSONDepth(t *testing.T) {
	nested := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	for _, c := range []struct {
		doc string
		ok  bool
	}{
		{nested(MaxJSONDepth, "[", "]"), true},
		{nested(MaxJSONDepth+1, "[", "]"), false},
		{nested(9990, "[", "]"), false},
		{strings.Repeat(`{"a":`, MaxJSONDepth) + "1" + strings.Repeat("}", MaxJSONDepth), true},
		{strings.Repeat(`{"a":`, MaxJSONDepth+1) + "1" + strings.Repeat("}", MaxJSONDepth+1), false},
		{`{"a":"` + nested(500, "[", "]") + `"}`, true}, // brackets in a string are text
		{strings.Repeat("[1],", 10000) + "1", true},     // wide is not deep
	} {
		err := CheckStorableJSON("input", []byte(c.doc))
		if (err == nil) != c.ok {
			t.Errorf("%.40s (%d bytes): err = %v, want ok=%v", c.doc, len(c.doc), err, c.ok)
		}
	}
	// Events the service builds around checked documents carry no depth limit of their own.
	if err := CheckStorableData("data", []byte(`{"output":`+nested(MaxJSONDepth, "[", "]")+`}`)); err != nil {
		t.Errorf("an event around a document of the greatest depth: %v", err)
	}
	if err := CheckStorableData("data", []byte(`{"output":"\u0000"}`)); err == nil {
		t.Error("an event holding a NUL was accepted")
	}
}

// A body's problem is named by its path, so a 400 says which field to fix; too deep a nesting
// by the member it is in.
func TestCheckJSONBodyNamesThePath(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	for _, c := range []struct{ body, field string }{
		{`{"name":"\ud800"}`, "name"},
		{`{"module":"x","input":{"a":{"b":[1,"\u0000"]}}}`, "input.a.b[1]"},
		{`{"callbackHeaders":{"X-Trace":"\udc00"}}`, "callbackHeaders.X-Trace"},
		{`{"input":{"a b":1e999999}}`, `input["a b"]`},
		{`{"input":{"\ud800":1}}`, "input"}, // a key at fault names its object
		{`{"input":` + deep + `}`, "input"},
		{`{"a":1,"config":{"k":` + deep + `}}`, "config"},
		{`{"components":[{"id":"t"},{"id":"u","name":"\ud800"}]}`, "components[1].name"},
		{`"\ud800"`, "body"},
		{deep, "body"},
		{`[{"a":"\u0000"}]`, "body"},
		{`{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{"j":"\u0000"}}}}}}}}}}`, "a.b.c.d.e.f.g.h…"},
	} {
		err := CheckJSONBody("body", []byte(c.body))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%.60s: err = %v, want a ValidationError naming %s", c.body, err, c.field)
		}
	}
	for _, ok := range []string{`{"name":"é \ud83d\ude00","n":[1.5,-2e10]}`, `{}`, ``, `not json`, `{"a":`} {
		if err := CheckJSONBody("body", []byte(ok)); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}
