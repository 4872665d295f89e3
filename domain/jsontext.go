package domain

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxJSONDepth is how deeply a JSON document the service accepts or stores may nest: a request
// body, and each input, config, output and error kept from one. Real documents stay far below
// it (the deepest documents people write by hand or generate from data are a dozen levels); it
// is serde_json's recursion limit, and twice .NET's default MaxDepth. It bounds the recursive
// walks every document meets (canonical cache keys, jq, expr and templates over an input,
// the console's pretty printing) and keeps a 1 MiB body from holding half a million levels.
const MaxJSONDepth = 128

// PostgreSQL's numeric, which jsonb stores every JSON number as, holds at most 131072 digits
// before the decimal point (a decimal weight of 131071) and 16383 after it (its display scale,
// zeroes included); the exponent of the text form must stay within about ±2^30.
const (
	maxNumericWeight   = 131071
	maxNumericScale    = 16383
	maxNumericExponent = 1<<30 - 2
)

// CheckStorableJSON refuses a JSON document the service cannot keep, naming field: text
// PostgreSQL's jsonb cannot store (invalid UTF-8, a NUL character \u0000, a lone UTF-16
// surrogate escape \ud800 to \udfff not in a pair), a number outside PostgreSQL's numeric
// (1e131072, 200000 digits, 1e-16384), or nesting deeper than MaxJSONDepth. encoding/json
// accepts all of these (it replaces bad bytes and lone surrogates when it decodes to Go values,
// but keeps raw messages as they came), and jsonb refuses the first ones with SQLSTATE 22P05,
// 22P02, 22021 or 22003, which would otherwise surface as a 500 after other events were written.
func CheckStorableJSON(field string, raw []byte) error {
	p := scanJSON(raw, MaxJSONDepth)
	if p == nil {
		return nil
	}
	return Invalid(field, "%s", p.message)
}

// CheckJSONBody is CheckStorableJSON for a whole JSON object sent as a request's body (or an
// MCP tool's arguments), run on its bytes: decoded to Go values, a lone surrogate would be
// replaced without a word. A problem is named by its path in the object ("name",
// "callbackHeaders.X-Trace", "components[0].config.url"), too deep a nesting by the member it
// is in, and one outside any member by whole ("body", "arguments").
func CheckJSONBody(whole string, raw []byte) error {
	p := scanJSON(raw, MaxJSONDepth)
	if p == nil {
		return nil
	}
	field := p.path
	if p.depth {
		field = p.member
	}
	if field == "" || !p.inObject {
		field = whole
	}
	return Invalid(field, "%s", p.message)
}

// CheckStorableData is CheckStorableJSON without the depth limit, for an event the service built
// from documents it checked already (their envelope adds levels of its own).
func CheckStorableData(field string, raw []byte) error {
	p := scanJSON(raw, 0)
	if p == nil {
		return nil
	}
	return Invalid(field, "%s", p.message)
}

// CheckStorableString is CheckStorableJSON for a Go string that will be stored inside JSON.
func CheckStorableString(field, s string) error {
	if !utf8.ValidString(s) {
		return Invalid(field, "must be valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return Invalid(field, "must not contain the NUL character")
	}
	return nil
}

// jsonProblem is what scanJSON found wrong, and where.
type jsonProblem struct {
	message string
	// path is where in the document it is ("a.b[2]"); member the document's member it is in.
	path, member string
	// inObject: the document is an object, whose member path and member name.
	inObject, depth bool
}

// pathShown bounds the elements of a path a message repeats.
const pathShown = 8

// jsonFrame is an open object or array of the document being scanned.
type jsonFrame struct {
	object  bool
	wantKey bool   // the next string of the object is a key
	key     []byte // the current member's key, as written (without its quotes)
	index   int    // the current element's index in an array
}

// jsonScanner walks JSON text once, without decoding it, looking at what PostgreSQL cannot
// store and at the nesting. Text that is not JSON is not its concern (the decoders refuse it):
// it only never fails on it.
type jsonScanner struct {
	raw      []byte
	maxDepth int // 0 for no limit
	stack    []jsonFrame
}

// scanJSON is the first problem of raw, or nil; maxDepth 0 checks no depth.
func scanJSON(raw []byte, maxDepth int) *jsonProblem {
	s := jsonScanner{raw: raw, maxDepth: maxDepth}
	return s.run()
}

func (s *jsonScanner) run() *jsonProblem {
	raw := s.raw
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			end, msg := s.str(i)
			if msg != "" {
				return s.problem(msg, false)
			}
			s.member(i+1, end)
			i = end
		case c == '{' || c == '[':
			if s.maxDepth > 0 && len(s.stack) >= s.maxDepth {
				return s.problem("must not nest deeper than "+strconv.Itoa(s.maxDepth)+" levels", true)
			}
			s.stack = append(s.stack, jsonFrame{object: c == '{', wantKey: c == '{'})
		case c == '}' || c == ']':
			if len(s.stack) > 0 {
				s.stack = s.stack[:len(s.stack)-1]
			}
		case c == ',':
			if n := len(s.stack); n > 0 {
				top := &s.stack[n-1]
				top.index++
				top.wantKey, top.key = top.object, nil
			}
		case c == '-' || (c >= '0' && c <= '9'):
			end := i + 1
			for end < len(raw) && isNumberByte(raw[end]) {
				end++
			}
			if msg := numberProblem(raw[i:end]); msg != "" {
				return s.problem(msg, false)
			}
			i = end - 1
		}
	}
	return nil
}

// member records the string raw[from:to] as the current key when it is one.
func (s *jsonScanner) member(from, to int) {
	if n := len(s.stack); n > 0 && s.stack[n-1].wantKey {
		s.stack[n-1].key, s.stack[n-1].wantKey = s.raw[from:to], false
	}
}

// str checks the string literal opening at raw[at] and returns the index of its closing quote
// (len(raw) when it has none) and what is wrong with it, if anything.
func (s *jsonScanner) str(at int) (int, string) {
	raw := s.raw
	start := at + 1
	for i := start; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			if !utf8.Valid(raw[start:i]) {
				return i, "must be valid UTF-8"
			}
			return i, ""
		case c == 0:
			return i, "must not contain the NUL character"
		case c == '\\':
			next, msg := escape(raw, i)
			if msg != "" {
				return i, msg
			}
			i = next
		}
	}
	if !utf8.Valid(raw[start:]) {
		return len(raw), "must be valid UTF-8"
	}
	return len(raw), ""
}

// escape checks the escape sequence at raw[at] (a backslash) and returns the index of its last
// byte.
func escape(raw []byte, at int) (int, string) {
	if at+1 >= len(raw) || raw[at+1] != 'u' {
		return at + 1, "" // a one-character escape, which may be a backslash or a quote
	}
	r, ok := hex4(raw, at+2)
	switch {
	case !ok:
		return at + 1, ""
	case r == 0:
		return at, "must not contain the NUL character"
	case r >= 0xD800 && r <= 0xDBFF:
		lo, ok := hex4(raw, at+8)
		if at+7 >= len(raw) || raw[at+6] != '\\' || raw[at+7] != 'u' || !ok || lo < 0xDC00 || lo > 0xDFFF {
			return at, "must not contain a lone UTF-16 surrogate"
		}
		return at + 11, ""
	case r >= 0xDC00 && r <= 0xDFFF:
		return at, "must not contain a lone UTF-16 surrogate"
	}
	return at + 5, ""
}

func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// numberProblem says why PostgreSQL's numeric cannot hold the JSON number num, or "" when it
// can (or num is not a number: the decoders refuse that). It follows numeric_in: the scale is
// the digits after the point less the exponent, the weight the power of ten of the first
// non-zero digit.
func numberProblem(num []byte) string {
	intDigits, frac, rest := splitNumber(num)
	exp, ok := exponent(rest)
	if !ok {
		return "must not hold a number beyond PostgreSQL's numeric range"
	}
	if int64(len(frac))-exp > maxNumericScale {
		return "must not hold a number with more than 16383 digits after the decimal point"
	}
	if first := firstNonZero(intDigits, frac); first >= 0 && int64(len(intDigits)-1-first)+exp > maxNumericWeight {
		return "must not hold a number with more than 131072 digits before the decimal point"
	}
	return ""
}

// splitNumber splits a JSON number into its integer digits, its fraction digits and the rest
// (the exponent part).
func splitNumber(num []byte) (intDigits, frac, rest []byte) {
	num = bytes.TrimPrefix(num, []byte{'-'})
	i := digits(num)
	intDigits, num = num[:i], num[i:]
	if len(num) > 0 && num[0] == '.' {
		num = num[1:]
		i = digits(num)
		frac, num = num[:i], num[i:]
	}
	return intDigits, frac, num
}

// firstNonZero is the index of the first digit other than 0 of the integer digits followed by
// the fraction digits, or -1 for zero.
func firstNonZero(intDigits, frac []byte) int {
	for i, c := range intDigits {
		if c != '0' {
			return i
		}
	}
	for i, c := range frac {
		if c != '0' {
			return len(intDigits) + i
		}
	}
	return -1
}

// digits is the length of the run of decimal digits b starts with.
func digits(b []byte) int {
	i := 0
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// exponent reads the exponent part of a number ("e-5", or "" for none); false when it is beyond
// what numeric_in takes.
func exponent(part []byte) (int64, bool) {
	if len(part) == 0 || (part[0] != 'e' && part[0] != 'E') {
		return 0, true
	}
	part = part[1:]
	neg := false
	if len(part) > 0 && (part[0] == '+' || part[0] == '-') {
		neg, part = part[0] == '-', part[1:]
	}
	var exp int64
	for _, c := range part {
		if !isDigit(c) {
			break
		}
		if exp = exp*10 + int64(c-'0'); exp > maxNumericExponent {
			return 0, false
		}
	}
	if neg {
		exp = -exp
	}
	return exp, true
}

// problem is msg found where the scan is; a depth problem is found opening one level too many.
func (s *jsonScanner) problem(msg string, depth bool) *jsonProblem {
	p := &jsonProblem{message: msg, depth: depth}
	frames := s.stack
	if n := len(frames); n > 0 && frames[n-1].object && frames[n-1].wantKey {
		frames = frames[:n-1] // in a key, or between members: the object is the place
	}
	p.inObject = len(frames) > 0 && frames[0].object
	var b strings.Builder
	for j, f := range frames {
		if j == pathShown {
			b.WriteString("…")
			break
		}
		if !f.object {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
			continue
		}
		key := keyText(f.key)
		if j == 0 {
			p.member = key
		}
		if j > 0 || !simpleKey(key) {
			if simpleKey(key) {
				b.WriteString("." + key)
			} else {
				b.WriteString("[" + strconv.Quote(key) + "]")
			}
			continue
		}
		b.WriteString(key)
	}
	p.path = b.String()
	return p
}

// keyText is a key as written decoded, or as written when it does not decode.
func keyText(raw []byte) string {
	var k string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &k); err != nil {
		return string(raw)
	}
	return k
}

// simpleKey reports a key a path can show bare: letters, digits, '_' and '-'.
func simpleKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}
