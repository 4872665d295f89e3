package console

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// Uncut, indentJSON prints what json.Indent prints.
func TestIndentJSONMatchesJSONIndent(t *testing.T) {
	for _, doc := range []string{
		`{}`, `[]`, `{"a":1}`, `[1,2,[],{}]`, `{"a":{"b":[1,{"c":"x, y: {z}"}]},"d":"q\"uote\\"}`,
		`{ "a" : [ 1 , 2 ] , "b" : { } }`, `"just a string"`, `12.5e3`, `null`,
		`{"é":"\u00e9 \ud83d\ude00","t":[true,false,null]}`,
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(doc), "", "  "); err != nil {
			t.Fatal(err)
		}
		got, cut := indentJSON([]byte(doc), maxShownJSON)
		if cut || got != want.String() {
			t.Errorf("%s:\n got %q (cut %v)\nwant %q", doc, got, cut, want.String())
		}
	}
}

// Cut, it is the start of what json.Indent prints, valid UTF-8, at most its limit, and the
// document's depth no longer multiplies its size.
func TestIndentJSONIsBounded(t *testing.T) {
	deep := strings.Repeat("[", 9990) + strings.Repeat("]", 9990) // issue 26: 20 KB, 399 MB indented
	text, cut := indentJSON([]byte(deep), 1000)
	if !cut || len(text) > 1000 || !strings.HasPrefix(text, "[\n  [\n    [") {
		t.Fatalf("deep document: cut %v, %d bytes, starting %.20q", cut, len(text), text)
	}
	doc := []byte(`{"k":"` + strings.Repeat("é", 100) + `","n":[1,2,3]}`)
	var full bytes.Buffer
	if err := json.Indent(&full, doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	for limit := 1; limit < full.Len(); limit++ {
		text, cut := indentJSON(doc, limit)
		if !cut || len(text) > limit || !utf8.ValidString(text) || !strings.HasPrefix(full.String(), text) {
			t.Fatalf("limit %d: cut %v, %q", limit, cut, text)
		}
	}
	if p := pretty(json.RawMessage(deep)); p == nil || !p.Truncated || len(p.String()) > maxShownJSON+len("\n…") {
		t.Fatalf("pretty of the deep document: %+v", p)
	}
	if p := pretty(json.RawMessage(`null`)); p != nil {
		t.Fatalf("pretty of null: %+v", p)
	}
	long := strings.Repeat("ü", maxShownFailure)
	if got := failureText(json.RawMessage(`{"code":"x","message":"` + long + `"}`)); len(got) > maxShownFailure+len("…") || !utf8.ValidString(got) {
		t.Fatalf("a long failure shows as %d bytes", len(got))
	}
}
