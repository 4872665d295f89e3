package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/web/httperr"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/*
var staticFS embed.FS

// csp lets pages load script and styles from this origin only, and talk to it only (the run
// page's detail fetch and EventSource): no inline script, no third party, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' https:; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

type pages struct {
	t *template.Template
	// version is appended to asset URLs so a deploy with changed assets is never served a
	// stale cached copy.
	version string
}

func loadPages() (*pages, error) {
	t, err := template.New("").Funcs(template.FuncMap{
		"join":     strings.Join,
		"has":      slices.Contains[[]string],
		"when":     when,
		"duration": duration,
		"credits":  func(c billing.Credits) string { return c.String() },
		"pretty":   pretty,
		"failure":  failureText,
		"path":     url.PathEscape,
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	return &pages{t: t, version: assetVersion()}, nil
}

func assetVersion() string {
	h := sha256.New()
	_ = fs.WalkDir(staticFS, "static", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := staticFS.ReadFile(path)
			h.Write([]byte(path))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	fsrv := http.StripPrefix("/console/static/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fsrv.ServeHTTP(w, r)
	})
}

// view is what every page template renders: the layout's parts and the page's Data.
type view struct {
	Title   string
	Section string
	Version string
	User    struct {
		ID, Email, Name string
		Staff           bool
	}
	CSRF   string
	WS     workspaceView
	Notice string
	Error  string
	Data   any
}

// render writes a page. Pages are rendered to a buffer first so a template error is a clean
// 500, not half a page.
func (c *Console) render(q *request, status int, name, title string, data any) {
	c.renderView(q, status, name, title, data, "", "")
}

func (c *Console) renderView(q *request, status int, name, title string, data any, notice, errText string) {
	v := view{Title: title, Section: q.section, Version: c.pages.version, CSRF: q.csrf, WS: q.ws, Notice: notice, Error: errText, Data: data}
	v.User.ID, v.User.Email, v.User.Name, v.User.Staff = q.user.ID, q.user.Email, q.user.Name, q.user.Staff
	var buf bytes.Buffer
	if err := c.pages.t.ExecuteTemplate(&buf, name, v); err != nil {
		c.log.WithError(err).WithField("page", name).Error("console: render page")
		http.Error(q.w, "Something went wrong. Try again in a moment.", http.StatusInternalServerError)
		return
	}
	h := q.w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", csp)
	h.Set("Referrer-Policy", "no-referrer")
	q.w.WriteHeader(status)
	_, _ = q.w.Write(buf.Bytes())
}

type errorData struct{ Heading, Message string }

func (c *Console) errorPage(q *request, status int, heading, message string) {
	c.render(q, status, "error", heading, errorData{Heading: heading, Message: message})
}

// fail shows err as a page in words, with the status of the one error mapping (httperr).
func (c *Console) fail(q *request, err error) {
	status, heading, message := words(err, q.ws.Role)
	if status == http.StatusInternalServerError {
		c.log.WithError(err).WithField("path", q.r.URL.Path).Error("console request failed")
	}
	c.errorPage(q, status, heading, message)
}

// words turns an error into a status, a heading and a sentence for a person.
func words(err error, role string) (int, string, string) {
	status, msg, _ := httperr.Classify(err)
	var se *access.ScopeError
	switch {
	case errors.Is(err, access.ErrNotMember):
		return status, "Not a member", "You are not a member of that workspace. Ask one of its owners to add you."
	case errors.As(err, &se):
		return status, "Not allowed", fmt.Sprintf("Your role in this workspace (%s) does not allow this; owners and admins can do it.", role)
	case status == http.StatusNotFound:
		return status, "Not found", "There is nothing at this address in your workspaces."
	case status == http.StatusBadRequest:
		return status, "That did not work", capitalize(msg) + "."
	case status == http.StatusConflict:
		return status, "That did not work", capitalize(msg) + "."
	case status == http.StatusPaymentRequired:
		return status, "Not enough credits", "The workspace's balance does not cover this."
	case status == http.StatusForbidden:
		return status, "Not allowed", capitalize(msg) + "."
	case status >= 500:
		return status, "Something went wrong", "The service could not answer this time. Try again in a moment."
	}
	return status, http.StatusText(status), capitalize(msg) + "."
}

// message is err as a sentence for a notice on the page that caused it.
func message(err error) string {
	_, _, m := words(err, "")
	return m
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// timeLayout is how pages write a moment: to the second, as runs and retries are that quick.
const timeLayout = "2006-01-02 15:04:05 UTC"

// when formats a time for a table cell; the zero time and nil are blank.
func when(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format(timeLayout)
	case *time.Time:
		if v == nil || v.IsZero() {
			return ""
		}
		return v.UTC().Format(timeLayout)
	}
	return ""
}

// failureText is a recorded failure as a sentence: its code and message when it has them
// (SPEC.md's error objects do), else its text; cut at maxShownFailure bytes.
func failureText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		if e.Code != "" {
			return cutText(e.Code+": "+e.Message, maxShownFailure)
		}
		return cutText(e.Message, maxShownFailure)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return cutText(s, maxShownFailure)
	}
	return cutText(string(raw), maxShownFailure)
}

// pager is a list's page and the links to its neighbours, keeping the other query parameters.
type pager struct {
	Page, TotalPages, Total int
	Prev, Next              string
}

func newPager(q *request, p projections.Page, total int) pager {
	pg := pager{Page: p.Page, TotalPages: p.TotalPages(total), Total: total}
	link := func(n int) string {
		v := q.r.URL.Query()
		v.Set("page", strconv.Itoa(n))
		return q.r.URL.Path + "?" + v.Encode()
	}
	if p.Page > 1 {
		pg.Prev = link(p.Page - 1)
	}
	if p.Page < pg.TotalPages {
		pg.Next = link(p.Page + 1)
	}
	return pg
}

// listPage reads the page of the query string; a bad one is shown in words.
func (c *Console) listPage(q *request) (projections.Page, bool) {
	p, err := projections.PageFromQuery(q.r.URL.Query())
	if err != nil {
		c.fail(q, err)
		return p, false
	}
	return p, true
}
