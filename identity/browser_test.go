package identity_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/app"
)

// chromiumPath finds Debian's chromium (scripts/test.sh installs it when missing).
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" || os.Getenv("SWITCHYARD_TEST_BROWSER") == "1" {
		// CI runs scripts/test.sh, which installs chromium: a missing browser there is a failure,
		// not a test to skip.
		t.Fatal("no chromium on PATH although CI needs the browser test: apt-get install chromium")
	}
	t.Skip("no chromium on PATH: scripts/test.sh installs it (apt-get install chromium)")
	return ""
}

// artifactsDir is the repository's artifacts/ directory, which scripts/test.sh keeps.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	out := filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBrowserSignInAndConsent drives a real Chromium through sign-in, the workspace picker and
// consent to the redirect with a code, and saves a screenshot of the consent page.
func TestBrowserSignInAndConsent(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser; skipped with -short")
	}
	chrome := chromiumPath(t)
	r := newRig(t)
	owner := r.user(false)
	ws := r.workspace(owner, 5)
	r.workspace(owner, 1) // a second workspace, so the picker has a choice

	got := make(chan url.Values, 1)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case got <- req.URL.Query():
		default:
		}
		_, _ = w.Write([]byte("<!doctype html><title>Signed in</title><p>Signed in.</p>"))
	}))
	t.Cleanup(cb.Close)
	ctx := context.Background()
	redirect := cb.URL + "/callback"
	// A public client (PKCE only, no secret), as a native or browser app registers.
	clientID, err := r.cmds.RegisterApp(ctx, commands.RegisterApp{OwnerUserID: owner.ID, Public: true, Metadata: app.Metadata{Name: "Acme Reports",
		Description: "Weekly reports of your workflow runs", RedirectURIs: []string{redirect},
		Scopes: []string{"openid", "email", "workspace:read", "workspace:read.billing"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return r.cmds.SubmitApp(ctx, clientID) },
		func() error { return r.cmds.ApproveApp(ctx, clientID, "staff") },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	verifier := oauth2.GenerateVerifier()
	authURL := r.issuer + "/oauth/authorize?" + url.Values{"client_id": {clientID}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid email workspace:read workspace:read.billing"}, "state": {"browser-state"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}.Encode()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.WindowSize(900, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()

	var consentTitle string
	var shot []byte
	err = chromedp.Run(bctx,
		chromedp.Navigate(authURL),
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, owner.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, testPassword, chromedp.ByID),
		chromedp.Click(`button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`input[value="`+ws+`"]`, chromedp.ByQuery),
		chromedp.Click(`input[value="`+ws+`"]`, chromedp.ByQuery),
		chromedp.Click(`button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#approve`, chromedp.ByID),
		chromedp.Text(`h1`, &consentTitle, chromedp.ByQuery),
		chromedp.FullScreenshot(&shot, 100), // quality 100: PNG
		chromedp.Click(`#approve`, chromedp.ByID),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	path := filepath.Join(artifactsDir(t), "consent-page.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case q := <-got:
		if q.Get("code") == "" || q.Get("state") != "browser-state" || q.Get("iss") != r.issuer {
			t.Fatalf("redirect back: %v", q)
		}
		st, tok := r.exchange(registered{ClientID: clientID, RedirectURI: redirect}, q.Get("code"), verifier)
		if st != 200 || tok["id_token"] == nil {
			t.Fatalf("exchange as a public client: %d %v", st, tok)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the browser never reached the redirect URI")
	}
	if len(shot) < 8 || string(shot[1:4]) != "PNG" || consentTitle == "" {
		t.Fatalf("consent page: heading %q, screenshot of %d bytes", consentTitle, len(shot))
	}
	t.Logf("consent page %q saved to %s", consentTitle, path)
}
