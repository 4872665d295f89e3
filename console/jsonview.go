package console

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// What a page shows of stored JSON is bounded whatever was stored. Pretty printing indents
// every line by its depth, so a document grows with the square of its nesting (a 20 KB array
// nested 9,990 deep printed as 399 MB): the printer stops at maxShownJSON bytes, in time
// proportional to what it read, and the page links to the raw document.
const (
	// maxShownJSON bounds the indented text of one document on a page.
	maxShownJSON = 64 << 10
	// maxShownFailure bounds the sentence of one recorded failure on a page.
	maxShownFailure = 2 << 10
)

// shownJSON is a stored document as a page shows it: indented, and cut when Truncated.
type shownJSON struct {
	text      string
	Truncated bool
}

// String is the indented text, ending in an ellipsis line when cut.
func (s *shownJSON) String() string { return s.text }

// pretty indents a JSON value for reading, up to maxShownJSON bytes; empty or null is nil,
// which shows as nothing.
func pretty(raw json.RawMessage) *shownJSON {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	text, cut := indentJSON(raw, maxShownJSON)
	if cut {
		text += "\n…"
	}
	return &shownJSON{text: text, Truncated: cut}
}

// indentJSON is json.Indent(src, "", "  ") cut at limit bytes (and then at a character's
// start); cut reports that it was. Its work is bounded by what it reads and writes, both at
// most about limit bytes past the white space it skips: it never indents more than it shows.
func indentJSON(src []byte, limit int) (text string, cut bool) {
	w := indentWriter{limit: limit}
	w.b.Grow(min(limit, 2*len(src)))
	depth, open := 0, false // open: a '{' or '[' just written, whose first line is not yet begun
	inString, escaped := false, false
	for _, c := range src {
		if w.full {
			break
		}
		if inString {
			w.byte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if open && c != '}' && c != ']' {
			open = false
			depth++
			w.newline(depth)
		}
		switch c {
		case '"':
			inString = true
			w.byte(c)
		case '{', '[':
			w.byte(c)
			open = true
		case ',':
			w.byte(c)
			w.newline(depth)
		case ':':
			w.byte(c)
			w.byte(' ')
		case '}', ']':
			if open {
				open = false // empty: {} or []
			} else {
				depth--
				w.newline(depth)
			}
			w.byte(c)
		default:
			w.byte(c)
		}
	}
	if !w.full {
		return w.b.String(), false
	}
	return validPrefix(w.b.String()), true
}

// indentWriter collects indentJSON's text up to its limit.
type indentWriter struct {
	b     strings.Builder
	limit int
	full  bool
}

func (w *indentWriter) byte(c byte) {
	if w.b.Len() >= w.limit {
		w.full = true
		return
	}
	w.b.WriteByte(c)
}

// newline starts a line indented to depth, as far as the limit lets it.
func (w *indentWriter) newline(depth int) {
	w.byte('\n')
	spaces := 2 * depth
	if room := w.limit - w.b.Len(); spaces > room {
		spaces, w.full = room, true
	}
	if spaces > 0 {
		w.b.WriteString(strings.Repeat(" ", spaces))
	}
}

// validPrefix drops a character cut in the middle from the end of s.
func validPrefix(s string) string {
	for range utf8.UTFMax - 1 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// cutText is s cut at limit bytes (at a character's start) with an ellipsis.
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return validPrefix(s[:limit]) + "…"
}
