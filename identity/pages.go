package identity

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
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
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// No framing: a consent page inside another site's frame is a clickjacking target.
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' https:; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type errorData struct{ Heading, Message string }

func (p *Provider) errorPage(w http.ResponseWriter, status int, heading, message string) {
	p.render(w, status, "error", heading, errorData{Heading: heading, Message: message})
}

func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	fsrv := http.StripPrefix("/static/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}
