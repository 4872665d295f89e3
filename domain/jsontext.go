package domain

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// CheckStorableJSON refuses JSON text that PostgreSQL's jsonb cannot store, naming field: invalid
// UTF-8, a NUL character (\u0000) and a lone UTF-16 surrogate escape (\ud800 to \udfff not in a
// pair). encoding/json accepts all three (it replaces bad bytes and lone surrogates when it decodes
// to Go values, but keeps raw messages as they came), and jsonb refuses them with SQLSTATE
// 22P05, 22P02 or 22021, which would otherwise surface as a 500 after other events were written.
func CheckStorableJSON(field string, raw []byte) error {
	if !utf8.Valid(raw) {
		return Invalid(field, "must be valid UTF-8")
	}
	if bytes.IndexByte(raw, 0) >= 0 {
		return Invalid(field, "must not contain the NUL character")
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return nil
	}
	return checkEscapes(field, raw)
}

// checkEscapes walks the string literals of raw looking at \u escapes.
func checkEscapes(field string, raw []byte) error {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			continue
		}
		switch {
		case r == 0:
			return Invalid(field, "must not contain the NUL character")
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := hex4(raw, i+8)
			if i+7 >= len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' || !ok || lo < 0xDC00 || lo > 0xDFFF {
				return Invalid(field, "must not contain a lone UTF-16 surrogate")
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return Invalid(field, "must not contain a lone UTF-16 surrogate")
		default:
			i += 5
		}
	}
	return nil
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

// CheckStorableString is CheckStorableJSON for a Go string that will be stored inside JSON.
func CheckStorableString(field, s string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return Invalid(field, "must be a string")
	}
	if !utf8.ValidString(s) {
		return Invalid(field, "must be valid UTF-8")
	}
	return CheckStorableJSON(field, b)
}
