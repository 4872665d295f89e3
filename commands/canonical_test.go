package commands

import (
	"bytes"
	"testing"
)

var canonicalSeeds = []string{
	`{}`, `[]`, `null`, `true`, `0`, `-0`, `1.5e-3`, `"x"`,
	`{"a":1,"b":[1,2,{"c":null}],"d":{"e":"f"}}`,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{ "a":1}`, `{"a" :1}`, `[1 ,2]`,
	`{"a":"<b>"}`, `{"a":"x&y"}`, `{"a":"\u0041"}`, `{"a":"\n"}`, "{\"a\":\"\u2028\"}",
	"{\"a\":\"\xff\"}", `{"é":1,"z":2}`, `{"z":1,"é":2}`, `{"a":1}{"b":2}`, `{"a":1} `,
	`{"a":01}`, `{"a":1.}`, `{"a":1e}`, `{"a":-}`, `{"":1,"a":2}`, `{"a":[]}`, `{"a":{}}`,
	`{"a":tru}`, `{"a":"x\u007fy"}`, `[[[[[[[[[[1]]]]]]]]]]`,
}

// The fast path answers only where the decoder's way gives the same bytes, for every input:
// a cache key must never change with it (windows opened before are found by their keys).
func FuzzCanonicalJSONMatchesTheDecodersWay(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, werr := decodedCanonical(raw)
		got, gerr := canonicalJSON(raw)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("canonicalJSON(%q) = %q, %v; the decoder's way %q, %v", raw, got, gerr, want, werr)
		}
		if canonicalMatches(raw) && !bytes.Equal(raw, want) {
			t.Fatalf("%q taken as canonical; the decoder's way writes %q", raw, want)
		}
	})
}

// Compact input with its keys in order is its own canonical form, found without decoding; the
// rest goes the decoder's way.
func TestCanonicalFormIsRecognisedWithoutDecoding(t *testing.T) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,2,{"c":null}],"d":{"e":"f"}}`, `{"":1,"a":2}`, "{\"a\":\"x\x7fy\"}", `-1.5E+3`} {
		if !canonicalMatches([]byte(s)) {
			t.Errorf("%s: not taken as canonical", s)
		}
	}
	for _, s := range []string{`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{ "a":1}`, `{"a":"<b>"}`, `{"a":"\u0041"}`,
		"{\"a\":\"\u2028\"}", "{\"a\":\"\xff\"}", `{"a":1}{"b":2}`, `{"a":01}`} {
		if canonicalMatches([]byte(s)) {
			t.Errorf("%s: taken as canonical", s)
		}
	}
	in := []byte(`{"a":1,"b":[1,2,{"c":null}],"d":{"e":"f"}}`)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := canonicalJSON(in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("a canonical input allocated %.0f times: it was decoded", allocs)
	}
}
