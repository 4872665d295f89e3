package bearer_test

import (
	"net/http/httptest"
	"testing"

	"github.com/switchyard/switchyard/web/bearer"
)

func TestToken(t *testing.T) {
	for _, c := range []struct {
		header, token string
		ok            bool
	}{
		{"", "", false},
		{"Basic dXNlcjpwdw==", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer  ", "", true}, // the scheme with a blank token: refused as invalid, not missing
		{"Bearer abc", "abc", true},
		{"bEaReR  abc ", "abc", true},
		{"Bearerabc", "", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if token, ok := bearer.Token(r); token != c.token || ok != c.ok {
			t.Errorf("Authorization %q: got (%q, %v), want (%q, %v)", c.header, token, ok, c.token, c.ok)
		}
	}
}
