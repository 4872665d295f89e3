package commands

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// canonicalJSON is raw as the cache key hashes it: decoded with its numbers kept as written and
// marshalled again, so that object keys come sorted and insignificant space and escapes go.
// Most calls' input and config come compact with their keys in order already; those are their
// own canonical form, which canonicalMatches tells without decoding them (decoding and
// marshalling was most of what a cache key cost). The key's bytes must never change: a window
// opened before an upgrade is found by its key after it.
func canonicalJSON(raw json.RawMessage) ([]byte, error) {
	if canonicalMatches(raw) {
		return raw, nil
	}
	return decodedCanonical(raw)
}

// decodedCanonical is canonicalJSON the decoder's way, which defines it.
func decodedCanonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// canonicalMaxDepth is how deep canonicalMatches looks before leaving a value to the decoder.
const canonicalMaxDepth = 64

// canonicalMatches reports whether raw is a single JSON value that json.Marshal, given it
// decoded with UseNumber, writes back byte for byte: no space between tokens, every object's
// keys strictly increasing (so no key twice), and strings that Marshal writes as they are (no
// escape, no control character, no HTML character, no U+2028 or U+2029, valid UTF-8). false
// only means "decode it to find out".
func canonicalMatches(raw []byte) bool {
	s := canonicalScanner{b: raw}
	return s.value(0) && s.i == len(s.b)
}

type canonicalScanner struct {
	b []byte
	i int
}

func (s *canonicalScanner) value(depth int) bool {
	if s.i >= len(s.b) || depth > canonicalMaxDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.number()
}

func (s *canonicalScanner) object(depth int) bool {
	s.i++ // {
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	var last []byte
	for first := true; ; first = false {
		key, ok := s.str()
		if !ok || (!first && bytes.Compare(last, key) >= 0) {
			return false
		}
		last = key
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		if !s.value(depth + 1) {
			return false
		}
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *canonicalScanner) array(depth int) bool {
	s.i++ // [
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth+1) || s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string Marshal writes as it is, and returns its contents.
func (s *canonicalScanner) str() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); {
		c := s.b[j]
		switch {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c < 0x20 || c == '\\' || c == '<' || c == '>' || c == '&':
			return nil, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(s.b[j:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return nil, false
			}
			j += size
		}
	}
	return nil, false
}

func (s *canonicalScanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// number reads a number by JSON's grammar, which Marshal writes back as it was written.
func (s *canonicalScanner) number() bool {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return s.i > start
}

// digits reads one or more digits.
func (s *canonicalScanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
