package identity

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/internal/dbfail"
	"github.com/switchyard/switchyard/web/httperr"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/*
var staticFS embed.FS

type pages struct{ t *template.Template }

func loadPages() (*pages, error) {
	t, err := template.New("").Funcs(template.FuncMap{
		"join": strings.Join,
		"has":  slices.Contains[[]string],
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, wrapf("identity templates", err)
	}
	return &pages{t: t}, nil
}

type pageData struct {
	Title string
	Data  any
}

// render writes a page. Pages are rendered to a buffer first so a template error is a clean
// 500, not half a page.
func (p *Provider) render(w http.ResponseWriter, status int, name, title string, data any) {
	var buf bytes.Buffer
	if err := p.pages.t.ExecuteTemplate(&buf, name, pageData{Title: title, Data: data}); err != nil {
		p.log.WithError(err).WithField("page", name).Error("render page")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	httperr.HTML(w, status, "default-src 'none'; style-src 'self'; img-src 'self' https:; frame-ancestors 'none'; base-uri 'none'", buf.Bytes())
}

type errorData struct{ Heading, Message string }

func (p *Provider) errorPage(w http.ResponseWriter, status int, heading, message string) {
	p.render(w, status, "error", heading, errorData{Heading: heading, Message: message})
}

// failPage answers a page whose request failed on err: 503 with Retry-After, in words, when
// the database cannot be reached for now (docs/operations.md), else a logged 500.
func (p *Provider) failPage(w http.ResponseWriter, what string, err error) {
	if dbfail.Unavailable(err) {
		p.log.WithError(err).Warn(what + ": database unavailable")
		w.Header().Set("Retry-After", httperr.UnavailableRetryAfter)
		p.errorPage(w, http.StatusServiceUnavailable, "Temporarily unavailable",
			"The service cannot reach its database right now. Wait a few seconds, then try again.")
		return
	}
	p.log.WithError(err).Error(what)
	p.errorPage(w, http.StatusInternalServerError, "Something went wrong", "Try again in a moment.")
}

func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	fsrv := http.StripPrefix("/static/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}
