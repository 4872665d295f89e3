package domain

import (
	"errors"
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
		{`{"a":"\u0000"}`, false},
		{`{"a":"\ud800"}`, false},
		{`{"a":"\udc00x"}`, false},
		{`{"a":"\ud83d\u0041"}`, false},
		{"{\"a\":\"\x00\"}", false},
		{"{\"a\":\"\xff\"}", false},
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
	if err := CheckStorableString("name", "ok é"); err != nil {
		t.Errorf("a plain string was refused: %v", err)
	}
}
