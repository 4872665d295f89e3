package identity_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/internal/browsertest"
)

// TestBrowserSignInAndConsent drives a real Chromium through sign-in, the workspace picker and
// consent to the redirect with a code, and saves a screenshot of the consent page.
func TestBrowserSignInAndConsent(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser; skipped with -short")
	}
	chrome := browsertest.Chromium(t)
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
	clientID, err := r.cmds.Apps.RegisterApp(ctx, commands.RegisterApp{OwnerUserID: owner.ID, Public: true, Metadata: app.Metadata{Name: "Acme Reports",
		Description: "Weekly reports of your workflow runs", RedirectURIs: []string{redirect},
		Scopes: []string{"openid", "email", "workspace:read", "workspace:read.billing"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return r.cmds.Apps.SubmitApp(ctx, clientID) },
		func() error { return r.cmds.Apps.ApproveApp(ctx, clientID, "staff", 1) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	verifier := oauth2.GenerateVerifier()
	authURL := r.issuer + "/oauth/authorize?" + url.Values{"client_id": {clientID}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid email workspace:read workspace:read.billing"}, "state": {"browser-state"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}.Encode()

	opts := browsertest.Options(chrome, 900, 1000)
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
	path := filepath.Join(browsertest.ArtifactsDir(t), "consent-page.png")
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
