package emailaddr_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/internal/emailaddr"
)

func TestCanonicalKeepsOrdinaryAddresses(t *testing.T) {
	for raw, want := range map[string]string{
		"alice@a.test":                       "alice@a.test",
		"  Alice@A.Test ":                    "alice@a.test",
		"Alice+Invoices@A.Test":              "alice+invoices@a.test",
		"o'brien.x_y-z@sub.example.com":      "o'brien.x_y-z@sub.example.com",
		"ａlice@ＥＸＡＭＰＬＥ.com":                  "alice@example.com", // full width, NFKC
		"user@Bücher.example":                "user@bücher.example",
		"user@xn--bcher-kva.example":         "user@bücher.example", // the A-label finds the same account
		"Jose\u0301@a.test":                  "josé@a.test",         // NFD in, NFC out
		"josé@a.test":                        "josé@a.test",
		"иван@почта.рф":                      "иван@почта.рф",
		"сера@почта.рф":                      "сера@почта.рф", // reads as Latin, but under a Cyrillic TLD
		"δοκιμή@παράδειγμα.δοκιμή":           "δοκιμή@παράδειγμα.δοκιμή",
		"用户@例子.广告":                           "用户@例子.广告",
		"山田タロウ+taro@example.jp":              "山田タロウ+taro@example.jp", // Han + Katakana + Latin: allowed together
		"a@b":                                "a@b",
		"x!#$%&'*+-/=?^_`{|}~@weird.example": "x!#$%&'*+-/=?^_`{|}~@weird.example",
	} {
		got, err := emailaddr.Canonical(raw)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestCanonicalRefusesLookAlikes(t *testing.T) {
	for raw, why := range map[string]string{
		"аlice@a.test":                      "mixes scripts (Cyrillic, Latin)", // Cyrillic а
		"alicе@a.test":                      "mixes scripts",                   // Cyrillic е at the end
		"alice@аpple.test":                  "the domain label аpple mixes scripts",
		"pаypal.com@a.test":                 "mixes scripts",
		"αlice@a.test":                      "mixes scripts (Greek, Latin)",
		"аре@a.test":                        "written in Cyrillic letters that read as Latin",
		"bob@аррӏе.com":                     "the domain label аррӏе is written in Cyrillic",
		"ѕсоре@example.com":                 "written in Cyrillic",
		"a lice@a.test":                     "the part before @",
		"a\u200dlice@a.test":                "the part before @", // zero-width joiner
		"al\u2028ice@a.test":                "the part before @",
		"alice@exa_mple.com":                "the domain after @",
		"alice@-a.com":                      "the domain after @",
		"alice@a..com":                      "the domain after @",
		"alice":                             "valid email address",
		"@a.test":                           "valid email address",
		"alice@":                            "valid email address",
		"":                                  "valid email address",
		"\xff@a.test":                       "valid email address",
		"Alice <alice@a.test>":              "",
		strings.Repeat("a", 65) + "@a.test": "at most",
		"a@" + strings.Repeat("b", 250) + ".test": "",
	} {
		got, err := emailaddr.Canonical(raw)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != "email" || !strings.Contains(ve.Message, why) {
			t.Errorf("Canonical(%q) = %q, %v; want a refusal of field email saying %q", raw, got, err, why)
		}
	}
}

func TestCanonicalIsIdempotent(t *testing.T) {
	for _, raw := range []string{"Alice+Tag@A.Test", "user@xn--bcher-kva.example", "ａlice@ＥＸＡＭＰＬＥ.com", "δοκιμή@παράδειγμα.δοκιμή"} {
		once, err := emailaddr.Canonical(raw)
		if err != nil {
			t.Fatal(err)
		}
		if twice, err := emailaddr.Canonical(once); err != nil || twice != once {
			t.Errorf("Canonical(%q) = %q, then %q %v", raw, once, twice, err)
		}
	}
}
