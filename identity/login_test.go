package identity_test

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
)

// Twenty wrong passwords at once for one account: the throttle (5 per account) must stop the
// rest before their password check, not after.
func TestParallelWrongPasswordsAreThrottled(t *testing.T) {
	r := newRig(t)
	u := r.user(false)
	const n = 20
	codes := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i], _ = r.api("POST", "/v1/auth/login", "", map[string]any{"email": u.Email, "password": "wrong-password"})
		}()
	}
	close(start)
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[401] > 5 || count[401]+count[429]+count[503] != n {
		t.Fatalf("answers %v: want at most 5 × 401, the rest 429 (or 503 when busy)", count)
	}
}

func TestSignInRedirectStaysOnSite(t *testing.T) {
	r := newRig(t)
	u := r.user(false)
	for _, ret := range []string{"/\t/evil.example/", "//evil.example/", "/\\evil.example", "https://evil.example/"} {
		b := r.browser()
		lp := b.do("GET", "/login?return_to="+url.QueryEscape(ret), nil)
		f := hidden(lp.body)
		if f.Get("return_to") != "/" {
			t.Errorf("login page for return_to %q carries %q", ret, f.Get("return_to"))
		}
		f.Set("return_to", ret)
		f.Set("email", u.Email)
		f.Set("password", testPassword)
		p := b.do("POST", "/login", f)
		if p.status != http.StatusSeeOther || p.location != "/" {
			t.Errorf("sign-in with return_to %q: %d Location %q", ret, p.status, p.location)
		}
	}
}
