// Package emailaddr gives an e-mail address the one form accounts are stored and looked up in,
// and refuses addresses made to look like another (docs/security.md, "Look-alike addresses").
//
// The part before @ is mapped and checked with the PRECIS UsernameCaseMapped profile (RFC 8265:
// width mapping, lower case, NFC, no spaces, controls or non-ASCII symbols) after NFKC; the
// domain goes through IDNA (UTS 46 mapping for lookup, then the registration rules of RFC 5891)
// and is kept in its Unicode form. Then, as identity providers do, two kinds of look-alike are
// refused: a part or domain label that mixes scripts (a Cyrillic а among Latin letters) beyond
// the combinations Unicode's "highly restrictive" level allows (UTS 39 5.2: Latin with Han and
// the Japanese kana, Bopomofo or Hangul), and a part or label written wholly in another script
// whose UTS 39 skeleton is plain ASCII (Cyrillic "аре" reads as "ape"), unless the domain's top
// level is in that same script (a Cyrillic address under .рф).
package emailaddr

import (
	"maps"
	"net/mail"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/net/idna"
	"golang.org/x/text/secure/precis"
	"golang.org/x/text/unicode/norm"

	"github.com/switchyard/switchyard/domain"
)

// Limits of RFC 5321 4.5.3.1, in bytes.
const (
	MaxLocalLength   = 64
	MaxAddressLength = 254
)

// field is the name refusals carry: every caller takes the address from a field "email".
const field = "email"

// Canonical returns the form of raw that accounts are stored and looked up in, or a
// *domain.ValidationError naming the field email.
func Canonical(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if !utf8.ValidString(s) || s == "" {
		return "", domain.Invalid(field, "must be a valid email address")
	}
	s = norm.NFKC.String(s)
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return "", domain.Invalid(field, "must be a valid email address")
	}
	local, err := precis.UsernameCaseMapped.String(s[:at])
	if err != nil {
		return "", domain.Invalid(field, "the part before @ has a character an address may not contain (a space, a control or a symbol outside ASCII)")
	}
	host, err := canonicalDomain(s[at+1:])
	if err != nil {
		return "", err
	}
	addr := local + "@" + host
	if len(local) > MaxLocalLength || len(addr) > MaxAddressLength {
		return "", domain.Invalid(field, "must be at most %d bytes, %d before the @", MaxAddressLength, MaxLocalLength)
	}
	if a, err := mail.ParseAddress(addr); err != nil || a.Address != addr || a.Name != "" {
		return "", domain.Invalid(field, "must be a valid email address")
	}
	if err := lookAlike(local, host); err != nil {
		return "", err
	}
	return addr, nil
}

// Legacy is the form addresses were stored in before Canonical (trimmed, lower case), so an
// account registered then can still be found.
func Legacy(raw string) string { return strings.ToLower(strings.TrimSpace(raw)) }

// canonicalDomain maps the domain for lookup (lower case, NFC, width; A-labels decoded) and
// checks the result against the registration rules.
func canonicalDomain(d string) (string, error) {
	u, err := idna.Lookup.ToUnicode(d)
	if err == nil {
		_, err = idna.Registration.ToASCII(u)
	}
	if err != nil {
		return "", domain.Invalid(field, "the domain after @ is not a valid domain name")
	}
	return u, nil
}

// lookAlike refuses mixed scripts in the local part or any domain label, and a part wholly in
// another script than its top-level domain's that reads as plain ASCII.
func lookAlike(local, host string) error {
	labels := strings.Split(host, ".")
	tld := soleScript(labels[len(labels)-1])
	parts := append([]string{local}, labels...)
	for i, p := range parts {
		where := "the part before @"
		if i > 0 {
			where = "the domain label " + p
		}
		scripts := scriptsOf(p)
		if !restrictive(scripts) {
			return domain.Invalid(field, "%s mixes scripts (%s); an address that can pass for another is refused", where, strings.Join(slices.Sorted(maps.Keys(scripts)), ", "))
		}
		if s := soleScript(p); s != "" && s != "Latin" && s != tld && asciiSkeleton(p) {
			return domain.Invalid(field, "%s is written in %s letters that read as Latin ones; an address that can pass for another is refused", where, s)
		}
	}
	return nil
}

// scriptsOf is the set of scripts of s's characters, Common and Inherited (digits,
// punctuation, combining marks) aside.
func scriptsOf(s string) map[string]bool {
	set := map[string]bool{}
	for _, r := range s {
		if name := scriptOf(r); name != "Common" && name != "Inherited" {
			set[name] = true
		}
	}
	return set
}

// soleScript is the one script of s, or "" when it has none or several.
func soleScript(s string) string {
	set := scriptsOf(s)
	if len(set) != 1 {
		return ""
	}
	for name := range set {
		return name
	}
	return ""
}

// likely are the scripts tried first; most characters are in one of them.
var likely = []string{"Latin", "Common", "Inherited", "Cyrillic", "Greek", "Han", "Hiragana", "Katakana", "Hangul", "Arabic", "Hebrew"}

func scriptOf(r rune) string {
	for _, name := range likely {
		if unicode.Is(unicode.Scripts[name], r) {
			return name
		}
	}
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			return name
		}
	}
	return "Unknown"
}

// allowedMixes are the script sets UTS 39's highly restrictive level accepts together.
var allowedMixes = []map[string]bool{
	{"Latin": true, "Han": true, "Hiragana": true, "Katakana": true},
	{"Latin": true, "Han": true, "Bopomofo": true},
	{"Latin": true, "Han": true, "Hangul": true},
}

func restrictive(scripts map[string]bool) bool {
	if len(scripts) <= 1 {
		return true
	}
	for _, mix := range allowedMixes {
		inside := true
		for s := range scripts {
			inside = inside && mix[s]
		}
		if inside {
			return true
		}
	}
	return false
}

// asciiSkeleton reports whether s's UTS 39 skeleton is plain ASCII: s can pass for an ASCII
// string.
func asciiSkeleton(s string) bool {
	for _, r := range confusables.Skeleton(s) {
		if r > unicode.MaxASCII {
			return false
		}
	}
	return true
}
