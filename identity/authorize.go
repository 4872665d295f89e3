package identity

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/app"
	"github.com/switchyard/switchyard/domain/authorization"
	"github.com/switchyard/switchyard/internal/dbfail"
)

// authParams are the authorization request parameters the picker and consent forms carry on.
var authParams = []string{"client_id", "redirect_uri", "response_type", "scope", "state", "nonce", "code_challenge", "code_challenge_method"}

type authRequest struct {
	values url.Values // authParams only
	app    app.State
	scopes []string
}

func (a authRequest) get(k string) string { return a.values.Get(k) }

// Hidden lists the parameters for hidden form fields.
func (a authRequest) Hidden() []struct{ Name, Value string } {
	var out []struct{ Name, Value string }
	for _, k := range authParams {
		if v := a.values.Get(k); v != "" {
			out = append(out, struct{ Name, Value string }{k, v})
		}
	}
	return out
}

// query re-encodes the request, for the return to /oauth/authorize after sign-in.
func (a authRequest) query() string {
	q := url.Values{}
	for _, k := range authParams {
		if v := a.values.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

// authorize serves the browser side of the flow: GET shows sign-in (by redirect), then the
// workspace picker, then consent; POST records the decision. Errors follow RFC 6749 4.1.2.1:
// with an unknown client or an unregistered redirect URI nothing is redirected (an error page
// instead), otherwise the error goes back to the client's redirect URI.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		p.errorPage(w, http.StatusBadRequest, "Invalid request", "The sign-in request could not be read.")
		return
	}
	src := r.Form
	if r.Method == http.MethodPost {
		src = r.PostForm
	}
	// Each parameter at most once (RFC 6749 3.1).
	for _, k := range append(authParams, "prompt") {
		if len(src[k]) > 1 {
			p.errorPage(w, http.StatusBadRequest, "Invalid request", "The parameter "+k+" was given more than once.")
			return
		}
	}
	req := authRequest{values: url.Values{}}
	for _, k := range authParams {
		if v := src.Get(k); v != "" {
			req.values.Set(k, v)
		}
	}
	a, err := p.cmds.Apps.App(r.Context(), req.get("client_id"))
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		p.failPage(w, "authorize: load app", err)
		return
	}
	if err != nil || !a.Live() {
		p.errorPage(w, http.StatusBadRequest, "Unknown application", "This application is not registered or is not approved for sign-in.")
		return
	}
	if req.get("redirect_uri") == "" || !a.AllowsRedirect(req.get("redirect_uri")) {
		p.errorPage(w, http.StatusBadRequest, "Invalid redirect URI", "The application asked to return to an address it has not registered. You have not been redirected.")
		return
	}
	req.app = a
	if oe := p.validateAuthRequest(&req); oe != nil {
		p.redirectError(w, r, req, oe.Code, oe.Description)
		return
	}
	pr, signedIn := p.session(r)
	prompt := strings.Fields(src.Get("prompt"))
	if r.Method == http.MethodGet {
		if slices.Contains(prompt, "none") {
			if !signedIn {
				p.redirectError(w, r, req, "login_required", "the user is not signed in")
			} else {
				p.redirectError(w, r, req, "consent_required", "the user must approve the request")
			}
			return
		}
		if !signedIn || slices.Contains(prompt, "login") {
			// The return address drops prompt, so signing in does not loop back to sign-in.
			http.Redirect(w, r, "/login?return_to="+url.QueryEscape("/oauth/authorize?"+req.query()), http.StatusFound)
			return
		}
		p.pickOrConsent(w, r, req, pr, src.Get("workspace_id"))
		return
	}
	if !signedIn {
		http.Redirect(w, r, "/login?return_to="+url.QueryEscape("/oauth/authorize?"+req.query()), http.StatusSeeOther)
		return
	}
	if !p.checkCSRF(r) {
		p.errorPage(w, http.StatusForbidden, "This form has expired", "Go back, reload the page and try again.")
		return
	}
	p.decide(w, r, req, pr, src.Get("workspace_id"), src.Get("decision"))
}

// validateAuthRequest checks what can be reported to the client by redirect.
func (p *Provider) validateAuthRequest(req *authRequest) *oauthError {
	if rt := req.get("response_type"); rt != "code" {
		if rt == "" {
			return oauthErr(0, "invalid_request", "response_type is required")
		}
		return oauthErr(0, "unsupported_response_type", "only response_type=code is supported")
	}
	if req.get("code_challenge") == "" {
		return oauthErr(0, "invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256")
	}
	if req.get("code_challenge_method") != "S256" {
		return oauthErr(0, "invalid_request", "code_challenge_method must be S256; plain is not supported")
	}
	if c := req.get("code_challenge"); len(c) != 43 || !authorization.ValidVerifier(c+"x") {
		// A S256 challenge is 43 base64url characters (the check borrows the verifier alphabet).
		return oauthErr(0, "invalid_request", "code_challenge is not an S256 challenge")
	}
	scopes := strings.Fields(req.get("scope"))
	if len(scopes) == 0 {
		scopes = slices.Clone(req.app.Metadata.Scopes)
	}
	var out []string
	for _, s := range scopes {
		if !slices.Contains(req.app.Metadata.Scopes, s) {
			return oauthErr(0, "invalid_scope", "scope "+s+" is not registered for this application")
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	req.scopes = out
	if len(req.get("nonce")) > 512 || len(req.get("state")) > 2048 {
		return oauthErr(0, "invalid_request", "state or nonce is too long")
	}
	return nil
}

// redirectError sends an error to the client's (validated) redirect URI, with state and iss.
func (p *Provider) redirectError(w http.ResponseWriter, r *http.Request, req authRequest, code, desc string) {
	q := url.Values{"error": {code}, "iss": {p.issuer}}
	if desc != "" {
		q.Set("error_description", desc)
	}
	if s := req.get("state"); s != "" {
		q.Set("state", s)
	}
	p.redirectTo(w, r, req.get("redirect_uri"), q)
}

func (p *Provider) redirectTo(w http.ResponseWriter, r *http.Request, redirectURI string, params url.Values) {
	u, _ := url.Parse(redirectURI) // validated at registration and matched exactly
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	status := http.StatusFound
	if r.Method == http.MethodPost {
		status = http.StatusSeeOther
	}
	noStore(w)
	http.Redirect(w, r, u.String(), status)
}

type workspaceChoice struct {
	ID, Name, Role string
}

type consentScope struct {
	Name, Description string
}

type authPageData struct {
	CSRF       string
	App        app.State
	Req        authRequest
	UserEmail  string
	Workspaces []workspaceChoice
	Workspace  workspaceChoice
	Scopes     []consentScope
	// Withheld are the requested scopes beyond the person's role, which consent does not grant.
	Withheld []consentScope
	Error    string
}

// describe gives each scope its plain words for the consent page.
func describe(scopes []string) []consentScope {
	out := make([]consentScope, 0, len(scopes))
	for _, s := range scopes {
		out = append(out, consentScope{Name: s, Description: app.ScopeDescription(s)})
	}
	return out
}

func (p *Provider) pickOrConsent(w http.ResponseWriter, r *http.Request, req authRequest, pr Principal, workspaceID string) {
	u, err := p.cmds.Identity.User(r.Context(), pr.UserID)
	if err != nil {
		p.failPage(w, "authorize: load user", err)
		return
	}
	data := authPageData{CSRF: p.csrfToken(w, r), App: req.app, Req: req, UserEmail: u.Email}
	if workspaceID != "" {
		ws, err := p.cmds.Workspaces.Workspace(r.Context(), workspaceID)
		if role := ws.Members[pr.UserID]; err == nil && role != "" {
			data.Workspace = workspaceChoice{ID: ws.ID, Name: ws.Name, Role: role}
			granted, beyond := access.WithinRole(role, req.scopes)
			data.Scopes, data.Withheld = describe(granted), describe(beyond)
			p.render(w, http.StatusOK, "consent", "Allow "+req.app.Metadata.Name+"?", data)
			return
		}
		data.Error = "Choose one of your workspaces."
	}
	list, err := p.queries.WorkspacesOfUser(r.Context(), pr.UserID)
	if err != nil {
		p.failPage(w, "authorize: list workspaces", err)
		return
	}
	for _, ws := range list {
		data.Workspaces = append(data.Workspaces, workspaceChoice{ID: ws.ID, Name: ws.Name, Role: ws.Role})
	}
	if len(data.Workspaces) == 0 {
		p.render(w, http.StatusOK, "noworkspace", "No workspace", data)
		return
	}
	p.render(w, http.StatusOK, "picker", "Choose a workspace", data)
}

// decide records the consent: an authorization bound to the one chosen workspace, replacing an
// earlier live one of the same user, app and workspace, and redirects with code, state and iss.
func (p *Provider) decide(w http.ResponseWriter, r *http.Request, req authRequest, pr Principal, workspaceID, decision string) {
	if decision != "approve" {
		p.redirectError(w, r, req, "access_denied", "the user declined the request")
		return
	}
	ws, err := p.cmds.Workspaces.Workspace(r.Context(), workspaceID)
	if err != nil || ws.Members[pr.UserID] == "" {
		p.errorPage(w, http.StatusForbidden, "Not a member", "You are not a member of that workspace.")
		return
	}
	// What the page offered: the requested scopes the person's role holds (GrantAuthorization
	// drops the others again, against the role it reads itself).
	scopes, _ := access.WithinRole(ws.Members[pr.UserID], req.scopes)
	if len(scopes) == 0 {
		p.redirectError(w, r, req, "access_denied", "none of the requested scopes is within the user's role in the workspace")
		return
	}
	ctx := commands.WithMetadata(r.Context(), commands.Metadata{Actor: pr.UserID, Source: "oauth-consent"})
	earlier, err := p.queries.LiveAuthorizationIDs(ctx, pr.UserID, req.app.ClientID, ws.ID)
	if err != nil {
		p.log.WithError(err).Error("authorize: earlier authorizations")
	}
	_, code, err := p.cmds.Apps.GrantAuthorization(ctx, commands.GrantAuthorization{UserID: pr.UserID, ClientID: req.app.ClientID,
		WorkspaceID: ws.ID, Scopes: scopes, CodeChallenge: req.get("code_challenge"), RedirectURI: req.get("redirect_uri"),
		Nonce: req.get("nonce"), AuthTime: p.sessionAuthTime(r), CodeTTL: p.opts.CodeTTL})
	if err != nil {
		code := "server_error"
		if dbfail.Unavailable(err) {
			code = "temporarily_unavailable" // RFC 6749 4.1.2.1: the client may try again
		}
		p.log.WithError(err).Error("authorize: grant")
		p.redirectError(w, r, req, code, "")
		return
	}
	for _, id := range earlier {
		if err := p.cmds.Apps.RevokeAuthorization(ctx, id, authorization.ReasonSuperseded); err != nil {
			p.log.WithError(err).Warn("authorize: supersede earlier authorization")
		}
	}
	q := url.Values{"code": {code}, "iss": {p.issuer}}
	if s := req.get("state"); s != "" {
		q.Set("state", s)
	}
	p.redirectTo(w, r, req.get("redirect_uri"), q)
}
