package identity

import "net/http"

// What the console's pages need of sign-in: who is signed in, and the CSRF token of forms.

// SignedIn returns the signed-in user of a browser request, from the session cookie; false
// without a live session (an app's access token in the cookie does not count).
func (p *Provider) SignedIn(r *http.Request) (Principal, bool) { return p.session(r) }

// CSRFToken returns the request's CSRF token for a form, setting the cookie when there is none.
func (p *Provider) CSRFToken(w http.ResponseWriter, r *http.Request) string { return p.csrfToken(w, r) }

// CheckCSRF reports whether a parsed POST form carries a CSRF token this service made for the
// request's session.
func (p *Provider) CheckCSRF(r *http.Request) bool { return p.checkCSRF(r) }
