package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// oneTimeView carries a value, a new secret, from a form's answer to the one page its redirect
// shows (post/redirect/get): sealed in a short-lived cookie of that workspace page, bound to
// the person and workspace, and deleted by the page that shows it. The secret is in no event
// and on no server: when the cookie is gone, so is the secret.
type oneTimeView[T any] struct {
	// cookie names the cookie; page is its path under the workspace (e.g. "/api-keys").
	cookie, page string
	// purpose separates the sealed values of different pages: one does not open as another.
	purpose string
	// ttl is how long the value waits to be shown.
	ttl time.Duration
}

// heldView is what the cookie seals: the value, the id of what it belongs to, and until when.
type heldView[T any] struct {
	ID    string    `json:"id"`
	Until time.Time `json:"until"`
	Value T         `json:"value"`
}

// aad binds the sealed value to its purpose, the person and the workspace: another person's
// or workspace's cookie does not open.
func (v oneTimeView[T]) aad(q *request) []byte {
	return []byte(v.purpose + "\x00" + q.user.ID + "\x00" + q.ws.ID)
}

// path is the workspace page the value is shown on, the only path the cookie is sent to.
func (v oneTimeView[T]) path(q *request) string { return "/workspaces/" + q.ws.ID + v.page }

// redirectTo answers a form with the address of the workspace's page, query added, so
// reloading what it shows repeats nothing.
func redirectTo(q *request, page string, query url.Values) {
	http.Redirect(q.w, q.r, "/workspaces/"+url.PathEscape(q.ws.ID)+page+"?"+query.Encode(), http.StatusSeeOther)
}

// hold seals value, the one view of what id names, in the cookie for the redirect's page.
func (v oneTimeView[T]) hold(c *Console, q *request, id string, value T) error {
	b, err := json.Marshal(heldView[T]{ID: id, Until: c.now().Add(v.ttl), Value: value})
	if err != nil {
		return err
	}
	sealed, err := c.idp.Sealer().Seal(b, v.aad(q))
	if err != nil {
		return err
	}
	v.set(c, q, sealed, int(v.ttl/time.Second))
	return nil
}

// take returns the value held for id and deletes the cookie, so it is shown once; nil when it
// was shown already, ran out or is another's.
func (v oneTimeView[T]) take(c *Console, q *request, id string) *T {
	ck, err := q.r.Cookie(v.cookie)
	if err != nil {
		return nil
	}
	b, err := c.idp.Sealer().Open(ck.Value, v.aad(q))
	var h heldView[T]
	if err != nil || json.Unmarshal(b, &h) != nil || !c.now().Before(h.Until) {
		v.set(c, q, "", -1)
		return nil
	}
	if h.ID != id {
		return nil // another's, created since: its own page shows it
	}
	v.set(c, q, "", -1)
	return &h.Value
}

func (v oneTimeView[T]) set(c *Console, q *request, value string, maxAge int) {
	http.SetCookie(q.w, &http.Cookie{Name: v.cookie, Value: value, Path: v.path(q), MaxAge: maxAge,
		HttpOnly: true, Secure: c.idp.SecureCookies(), SameSite: http.SameSiteStrictMode})
}

// listedCredential is a row of a list of keys or tokens.
type listedCredential[R any] interface {
	rowID() string
	// revokedAs is the listed row with fresh's revocation.
	revokedAs(fresh R) R
}

// withFresh is a page of list with the rows just created or revoked as their streams have
// them, read by fresh: the read model may not have caught up with the change yet. A created
// row not yet listed comes first; one that is not the workspace's (fresh fails) is left out.
func withFresh[R listedCredential[R]](list []R, created, revoked string, fresh func(id string) (R, error)) []R {
	for _, id := range []string{created, revoked} {
		if id == "" {
			continue
		}
		row, err := fresh(id)
		if err != nil {
			continue
		}
		if i := slices.IndexFunc(list, func(r R) bool { return r.rowID() == row.rowID() }); i >= 0 {
			list[i] = list[i].revokedAs(row)
		} else if id == created {
			list = append([]R{row}, list...)
		}
	}
	return list
}

// credentialState is active, expired or revoked: the state in words of an API key or MCP token.
func credentialState(revokedAt, expiresAt *time.Time, now time.Time) string {
	switch {
	case revokedAt != nil:
		return "revoked"
	case expiresAt != nil && !expiresAt.After(now):
		return "expired"
	}
	return "active"
}
